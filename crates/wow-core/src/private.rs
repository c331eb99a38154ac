//! Support for the derive macros; not part of the public API.

pub use serde_json;

use serde::de::{DeserializeOwned, Error as _};
use serde_json::Value;

use crate::model::command::{BindingError, BodyDecodeError};
use crate::model::error_code::ErrorCode;

/// Runs `validator` rules and turns failures into binding errors.
pub fn validate<T: validator::Validate>(payload: &T) -> Result<(), Vec<BindingError>> {
    payload
        .validate()
        .map_err(|errors| BindingError::from_validation(&errors))
}

/// The JSON body of a command or event without a payload.
pub fn unit_body() -> Value {
    Value::Object(serde_json::Map::new())
}

/// Reads the payload of `name`, naming the failing field's path when there is one.
pub fn decode_payload<T: DeserializeOwned>(name: &str, body: &Value) -> Result<T, BodyDecodeError> {
    serde_path_to_error::deserialize(body).map_err(|error| {
        let path = error.path().to_string();
        BodyDecodeError::InvalidBody {
            name: name.to_owned(),
            path: (path != ".").then_some(path),
            source: error.into_inner(),
        }
    })
}

/// Accepts the body of a command or event without a payload: `{}` or `null`.
pub fn decode_unit(name: &str, body: &Value) -> Result<(), BodyDecodeError> {
    match body {
        Value::Null => Ok(()),
        Value::Object(map) if map.is_empty() => Ok(()),
        _ => Err(BodyDecodeError::InvalidBody {
            name: name.to_owned(),
            path: None,
            source: serde_json::Error::custom(format!("`{name}` takes no fields; send {{}}")),
        }),
    }
}

/// The JSON Schema of a command's payload.
pub fn schema_of<T: schemars::JsonSchema>() -> Value {
    serde_json::to_value(schemars::schema_for!(T)).unwrap_or(Value::Null)
}

/// The JSON Schema of a command without a payload: what [`decode_unit`] accepts, `{}` or `null`.
pub fn unit_schema() -> Value {
    serde_json::json!({"type": ["object", "null"], "additionalProperties": false})
}

/// The error code named `code`.
pub fn error_code(code: &str) -> ErrorCode {
    let Ok(code) = code.parse();
    code
}
