//! A JSON document read as `serde_json::Value`, except that an object naming a key twice is
//! an error. `Value` keeps the last of the two silently; RFC 8259 §4 leaves the meaning of
//! such a document to each reader, so `{"workers": 10, "workers": 1}` says 10 to one parser
//! and 1 to another, and a page that does not say which it means is refused, as a path that
//! selects several values is.

use std::fmt;

use serde::de::{Deserialize, Deserializer, Error, MapAccess, SeqAccess, Visitor};
use serde_json::map::Entry;
use serde_json::{Map, Number, Value};

/// `body` as a `Value`; an error names the first key an object repeats.
pub(super) fn from_slice(body: &[u8]) -> Result<Value, serde_json::Error> {
    serde_json::from_slice::<Strict>(body).map(|s| s.0)
}

struct Strict(Value);

impl<'de> Deserialize<'de> for Strict {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(StrictVisitor).map(Strict)
    }
}

struct StrictVisitor;

impl<'de> Visitor<'de> for StrictVisitor {
    type Value = Value;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a JSON value")
    }

    fn visit_bool<E>(self, v: bool) -> Result<Value, E> {
        Ok(Value::Bool(v))
    }

    fn visit_i64<E>(self, v: i64) -> Result<Value, E> {
        Ok(Value::Number(v.into()))
    }

    fn visit_u64<E>(self, v: u64) -> Result<Value, E> {
        Ok(Value::Number(v.into()))
    }

    fn visit_f64<E>(self, v: f64) -> Result<Value, E> {
        // JSON text has no NaN or infinity; `Value` reads one as null too.
        Ok(Number::from_f64(v).map_or(Value::Null, Value::Number))
    }

    fn visit_str<E>(self, v: &str) -> Result<Value, E> {
        Ok(Value::String(v.to_owned()))
    }

    fn visit_string<E>(self, v: String) -> Result<Value, E> {
        Ok(Value::String(v))
    }

    fn visit_unit<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }

    fn visit_none<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }

    fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<Value, D::Error> {
        Strict::deserialize(d).map(|s| s.0)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
        let mut items = Vec::with_capacity(seq.size_hint().unwrap_or(0).min(1024));
        while let Some(Strict(v)) = seq.next_element()? {
            items.push(v);
        }
        Ok(Value::Array(items))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
        let mut object = Map::new();
        while let Some(key) = map.next_key::<String>()? {
            match object.entry(key) {
                Entry::Vacant(slot) => {
                    let Strict(v) = map.next_value()?;
                    slot.insert(v);
                }
                Entry::Occupied(seen) => {
                    return Err(A::Error::custom(format!(
                        "the key {:?} appears twice in one object, so its value is ambiguous",
                        seen.key()
                    )));
                }
            }
        }
        Ok(Value::Object(object))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_as_value_does_but_refuses_a_repeated_key() {
        let docs = [
            r#"{"a": 1, "b": [true, null, -2, 1.5e3, "x\u00e9"], "c": {"d": {}}, "e": []}"#,
            r#"[{"a": 1}, {"a": 2}]"#,
            r#"{"n": 18446744073709551615, "m": -9223372036854775808, "z": -0.0}"#,
            "3",
            r#""s""#,
        ];
        for doc in docs {
            let plain: Value = serde_json::from_slice(doc.as_bytes()).unwrap();
            assert_eq!(from_slice(doc.as_bytes()).unwrap(), plain, "{doc}");
        }
        for doc in [
            r#"{"workers": 10, "workers": 1}"#,
            r#"{"a": {"b": 1, "c": 2, "b": 3}}"#,
            r#"[{"x": 1}, {"x": 2, "x": 2}]"#,
        ] {
            let e = from_slice(doc.as_bytes()).unwrap_err();
            assert!(e.to_string().contains("appears twice"), "{doc}: {e}");
        }
        // serde_json's nesting limit still holds.
        let deep = format!("{}{}", "[".repeat(200), "]".repeat(200));
        assert!(from_slice(deep.as_bytes()).is_err());
    }
}
