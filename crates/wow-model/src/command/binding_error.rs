//! Validation failures, one per field.

use std::fmt;

use serde::{Deserialize, Serialize};

/// One field that failed validation: its name and what is wrong with it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BindingError {
    /// The field's name as the caller wrote it (for nested fields, a dotted path).
    pub name: String,
    /// What is wrong, for a person to read.
    pub msg: String,
}

impl BindingError {
    /// The field `name` is wrong because `msg`.
    pub fn new(name: impl Into<String>, msg: impl Into<String>) -> Self {
        Self {
            name: name.into(),
            msg: msg.into(),
        }
    }

    /// The binding errors of a `validator` report, one per failed rule, in field order.
    pub fn from_validation(errors: &validator::ValidationErrors) -> Vec<BindingError> {
        let mut out = Vec::new();
        collect(errors, "", &mut out);
        out
    }
}

fn collect(errors: &validator::ValidationErrors, prefix: &str, out: &mut Vec<BindingError>) {
    use validator::ValidationErrorsKind;
    let mut fields: Vec<_> = errors.errors().iter().collect();
    fields.sort_by(|a, b| a.0.cmp(b.0));
    for (field, kind) in fields {
        let name = if prefix.is_empty() {
            field.to_string()
        } else {
            format!("{prefix}.{field}")
        };
        match kind {
            ValidationErrorsKind::Field(list) => out.extend(
                list.iter()
                    .map(|e| BindingError::new(name.clone(), describe(e))),
            ),
            ValidationErrorsKind::Struct(inner) => collect(inner, &name, out),
            ValidationErrorsKind::List(items) => {
                for (index, inner) in items {
                    collect(inner, &format!("{name}[{index}]"), out);
                }
            }
        }
    }
}

fn describe(error: &validator::ValidationError) -> String {
    if let Some(message) = &error.message {
        return message.to_string();
    }
    let param = |key: &str| error.params.get(key).map(|v| v.to_string());
    match error.code.as_ref() {
        "range" => match (param("min"), param("max")) {
            (Some(min), Some(max)) => format!("must be between {min} and {max}"),
            (Some(min), None) => format!("must be at least {min}"),
            (None, Some(max)) => format!("must be at most {max}"),
            (None, None) => "is out of range".to_owned(),
        },
        "length" => match (param("min"), param("max")) {
            (Some(min), Some(max)) => format!("length must be between {min} and {max}"),
            (Some(min), None) if min == "1" => "must not be empty".to_owned(),
            (Some(min), None) => format!("length must be at least {min}"),
            (None, Some(max)) => format!("length must be at most {max}"),
            (None, None) => "has the wrong length".to_owned(),
        },
        code => format!("failed the `{code}` rule"),
    }
}

impl fmt::Display for BindingError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.name, self.msg)
    }
}
