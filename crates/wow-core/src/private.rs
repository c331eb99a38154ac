//! Support for the derive macros; not part of the public API.

pub use serde_json;

use serde::de::{DeserializeOwned, Error as _};
use serde_json::{Map, Value};

use wow_model::command::{BindingError, BodyDecodeError};
use wow_model::error_code::ErrorCode;

/// Runs `validator` rules and turns failures into binding errors.
pub fn validate<T: validator::Validate>(payload: &T) -> Result<(), Vec<BindingError>> {
    payload
        .validate()
        .map_err(|errors| BindingError::from_validation(&errors))
}

/// A command payload on its way to validation: `(&Payload(p)).validate_payload()` runs
/// `validator` rules when `p`'s type implements `Validate` ([`RunValidation`], found first by
/// method resolution), and accepts it otherwise ([`SkipValidation`], one autoref further).
#[derive(Debug)]
pub struct Payload<'a, T>(pub &'a T);

/// Validation of a payload that implements `validator::Validate`.
pub trait RunValidation {
    /// Runs the payload's rules.
    fn validate_payload(&self) -> Result<(), Vec<BindingError>>;
}

impl<T: validator::Validate> RunValidation for Payload<'_, T> {
    fn validate_payload(&self) -> Result<(), Vec<BindingError>> {
        validate(self.0)
    }
}

/// Validation of a payload without rules: it is accepted.
pub trait SkipValidation {
    /// Accepts the payload.
    fn validate_payload(&self) -> Result<(), Vec<BindingError>>;
}

impl<T> SkipValidation for &Payload<'_, T> {
    fn validate_payload(&self) -> Result<(), Vec<BindingError>> {
        Ok(())
    }
}

/// What `#[command(validate)]` asserts of a payload: it implements the `validator::Validate`
/// of the version wow-core depends on (re-exported as `wow_core::validator`). A `Validate`
/// derived from another version of `validator` is another trait: without the attribute its
/// rules would never run, so the attribute makes it a compile error that says so.
#[diagnostic::on_unimplemented(
    message = "`{Self}` is not validated by the `validator` wow-core uses",
    label = "its rules would not run",
    note = "derive `wow_core::validator::Validate` (the version wow-core re-exports), or depend on the same `validator` version as wow-core: a `Validate` of another version is another trait"
)]
pub trait ValidatedByWowCore {}

impl<T: validator::Validate> ValidatedByWowCore for T {}

/// Compiles only when `T` implements wow-core's `validator::Validate` (`#[command(validate)]`
/// asserts it). A payload without rules fails:
///
/// ```compile_fail
/// #[derive(Debug, Clone, serde::Serialize, serde::Deserialize, schemars::JsonSchema)]
/// struct NoRules {
///     text: String,
/// }
///
/// #[derive(Debug, Clone, wow_core::Command)]
/// enum Commands {
///     #[command(validate)]
///     Note(NoRules),
/// }
/// ```
///
/// and so does one whose rules come from another version of `validator` (here a `Validate`
/// trait of its own, as another version's is to wow-core):
///
/// ```compile_fail
/// mod validator_of_another_version {
///     pub trait Validate {
///         fn validate(&self) -> Result<(), String>;
///     }
/// }
///
/// #[derive(Debug, Clone, serde::Serialize, serde::Deserialize, schemars::JsonSchema)]
/// struct Rename {
///     name: String,
/// }
///
/// impl validator_of_another_version::Validate for Rename {
///     fn validate(&self) -> Result<(), String> {
///         Ok(())
///     }
/// }
///
/// #[derive(Debug, Clone, wow_core::Command)]
/// enum Commands {
///     #[command(validate)]
///     Rename(Rename),
/// }
/// ```
///
/// while wow-core's own derive compiles:
///
/// ```
/// #[derive(Debug, Clone, serde::Serialize, serde::Deserialize, schemars::JsonSchema, wow_core::validator::Validate)]
/// struct Rename {
///     #[validate(length(min = 1))]
///     name: String,
/// }
///
/// #[derive(Debug, Clone, wow_core::Command)]
/// enum Commands {
///     #[command(validate)]
///     Rename(Rename),
/// }
/// ```
pub fn assert_validate<T: ValidatedByWowCore>() {}

/// Writes one field of a domain error into its detail; a field that does not encode is left
/// out (decoding the detail then fails, never guesses).
pub fn detail_insert<T: serde::Serialize>(detail: &mut Map<String, Value>, key: &str, value: &T) {
    if let Ok(value) = serde_json::to_value(value) {
        detail.insert(key.to_owned(), value);
    }
}

/// Reads one field of a domain error from its detail: `None` when it is missing or does not
/// decode.
pub fn detail_field<T: DeserializeOwned>(detail: &Map<String, Value>, key: &str) -> Option<T> {
    serde_json::from_value(detail.get(key)?.clone()).ok()
}

/// The JSON body of a command or event without a payload.
pub fn unit_body() -> Value {
    Value::Object(serde_json::Map::new())
}

/// Reads the payload of `name`, naming the failing field's path when there is one.
pub fn decode_payload<T: DeserializeOwned>(name: &str, body: &Value) -> Result<T, BodyDecodeError> {
    // Tracking the path costs an allocation per field: decode without it, and only a body
    // that fails is decoded again to say where.
    if let Ok(payload) = T::deserialize(body) {
        return Ok(payload);
    }
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
