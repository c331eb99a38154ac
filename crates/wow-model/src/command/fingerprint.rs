//! The request fingerprint of SPEC ID-5: a hash of the command's name and body.

use std::fmt::Write as _;

use serde_json::Value;
use sha2::{Digest, Sha256};

/// The fingerprint of the command `name` with `body`: 32 hex digits of SHA-256 over the name
/// and the body's canonical JSON (object keys sorted), so that two encodings of the same body
/// (keys in another order, other whitespace) give the same fingerprint.
pub fn request_fingerprint(name: &str, body: &Value) -> String {
    let mut canonical = String::with_capacity(64);
    canonical.push_str(name);
    canonical.push('\n');
    write_canonical(body, &mut canonical);
    let digest = Sha256::digest(canonical.as_bytes());
    let mut hex = String::with_capacity(32);
    for byte in &digest[..16] {
        let _ = write!(hex, "{byte:02x}");
    }
    hex
}

fn write_canonical(value: &Value, out: &mut String) {
    match value {
        Value::Object(map) => {
            let mut entries: Vec<_> = map.iter().collect();
            entries.sort_by(|a, b| a.0.cmp(b.0));
            out.push('{');
            for (index, (key, value)) in entries.into_iter().enumerate() {
                if index > 0 {
                    out.push(',');
                }
                out.push_str(&Value::String(key.clone()).to_string());
                out.push(':');
                write_canonical(value, out);
            }
            out.push('}');
        }
        Value::Array(items) => {
            out.push('[');
            for (index, item) in items.iter().enumerate() {
                if index > 0 {
                    out.push(',');
                }
                write_canonical(item, out);
            }
            out.push(']');
        }
        scalar => out.push_str(&scalar.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn key_order_does_not_change_the_fingerprint() {
        let a: Value =
            serde_json::from_str(r#"{"to":"b","amount":5,"meta":{"x":1,"y":2}}"#).unwrap();
        let b: Value =
            serde_json::from_str(r#"{ "amount": 5, "meta": {"y":2,"x":1}, "to": "b" }"#).unwrap();
        assert_eq!(
            request_fingerprint("transfer", &a),
            request_fingerprint("transfer", &b)
        );
    }

    #[test]
    fn name_and_body_both_count() {
        let body = json!({"amount": 5});
        let base = request_fingerprint("deposit", &body);
        assert_ne!(base, request_fingerprint("withdraw", &body));
        assert_ne!(base, request_fingerprint("deposit", &json!({"amount": 6})));
        assert_eq!(base.len(), 32);
    }
}
