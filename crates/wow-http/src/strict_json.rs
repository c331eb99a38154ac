//! JSON read strictly: an object that repeats a key is refused, where `serde_json` would keep
//! the last value silently (`{"amount":1,"amount":1000}` would deposit 1000); a string or a key
//! holding NUL (`\u0000`) is refused, which PostgreSQL cannot store in text and SQLite would,
//! so that every store answers the same 400.

use std::fmt;

use serde::de::{Deserialize, Deserializer, Error, MapAccess, SeqAccess, Visitor};
use serde_json::{Map, Number, Value};

/// A JSON value in which no object repeats a key.
pub(crate) struct StrictValue(pub(crate) Value);

impl<'de> Deserialize<'de> for StrictValue {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(StrictVisitor).map(StrictValue)
    }
}

struct StrictVisitor;

impl<'de> Visitor<'de> for StrictVisitor {
    type Value = Value;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON value")
    }

    fn visit_bool<E: Error>(self, v: bool) -> Result<Value, E> {
        Ok(Value::Bool(v))
    }

    fn visit_i64<E: Error>(self, v: i64) -> Result<Value, E> {
        Ok(Value::Number(v.into()))
    }

    fn visit_u64<E: Error>(self, v: u64) -> Result<Value, E> {
        Ok(Value::Number(v.into()))
    }

    fn visit_f64<E: Error>(self, v: f64) -> Result<Value, E> {
        // `17.0` is the integer 17 to JSON Schema (and to JavaScript), so an integer field
        // takes it; only where a double holds every integer exactly (|v| <= 2^53). That the
        // double is the literal's own value takes serde_json's `float_roundtrip` (Cargo.toml):
        // its default parser read `1815087510632213.0` as `1815087510632212.75`.
        if v.fract() == 0.0 && v.abs() <= 9_007_199_254_740_992.0 {
            return Ok(Value::Number((v as i64).into()));
        }
        Ok(Number::from_f64(v).map_or(Value::Null, Value::Number))
    }

    fn visit_str<E: Error>(self, v: &str) -> Result<Value, E> {
        without_nul(v)?;
        Ok(Value::String(v.to_owned()))
    }

    fn visit_string<E: Error>(self, v: String) -> Result<Value, E> {
        without_nul(&v)?;
        Ok(Value::String(v))
    }

    fn visit_unit<E: Error>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }

    fn visit_none<E: Error>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }

    fn visit_some<D: Deserializer<'de>>(self, deserializer: D) -> Result<Value, D::Error> {
        deserializer.deserialize_any(self)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
        let mut items = Vec::new();
        while let Some(StrictValue(item)) = seq.next_element()? {
            items.push(item);
        }
        Ok(Value::Array(items))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
        let mut object = Map::new();
        while let Some(key) = map.next_key::<String>()? {
            without_nul(&key)?;
            let StrictValue(value) = map.next_value()?;
            if object.contains_key(&key) {
                return Err(A::Error::custom(format!("duplicate key `{key}`")));
            }
            object.insert(key, value);
        }
        Ok(Value::Object(object))
    }
}

/// `text` unless it holds NUL.
fn without_nul<E: Error>(text: &str) -> Result<(), E> {
    if text.contains('\0') {
        return Err(E::custom(
            "a string holds NUL (\\u0000), which no string may hold",
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(text: &str) -> Result<Value, serde_json::Error> {
        serde_json::from_str::<StrictValue>(text).map(|v| v.0)
    }

    #[test]
    fn reads_what_serde_json_reads() {
        let text = r#"{"a":[1,-2,3.5,"x",true,null,{"b":{}}],"c":18446744073709551615}"#;
        assert_eq!(
            read(text).unwrap(),
            serde_json::from_str::<Value>(text).unwrap()
        );
    }

    #[test]
    fn reads_an_integral_number_written_with_a_fraction_as_an_integer() {
        assert_eq!(
            read(r#"{"a":17.0,"b":-2e3,"c":1.5}"#).unwrap(),
            serde_json::json!({"a":17,"b":-2000,"c":1.5})
        );
        assert!(
            read("1e300").unwrap().is_f64(),
            "beyond 2^53 it stays a double"
        );
        // Found by schemathesis: without `float_roundtrip` this read as ...212.75, a 400.
        assert_eq!(
            read("1815087510632213.0").unwrap(),
            serde_json::json!(1_815_087_510_632_213_i64)
        );
    }

    #[test]
    fn refuses_a_repeated_key_at_any_depth() {
        for text in [r#"{"amount":1,"amount":1000}"#, r#"{"a":[{"b":1,"b":2}]}"#] {
            let error = read(text).unwrap_err().to_string();
            assert!(error.contains("duplicate key"), "{text}: {error}");
        }
    }

    #[test]
    fn refuses_nul_in_a_string_or_a_key_at_any_depth() {
        for text in [
            r#"{"name":"a\u0000b"}"#,
            r#"{"a\u0000":1}"#,
            r#"{"a":[{"b":"\u0000"}]}"#,
        ] {
            let error = read(text).unwrap_err().to_string();
            assert!(error.contains("NUL"), "{text}: {error}");
        }
        assert!(
            read(r#"{"name":"a\u0001b"}"#).is_ok(),
            "other controls are data"
        );
    }
}
