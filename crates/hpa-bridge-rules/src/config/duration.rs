//! Durations as written in the configuration.

use std::fmt;
use std::time::Duration;

use schemars::JsonSchema;
use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// A duration written as `500ms`, `10s`, `2m`, `1h` or a concatenation such as `1m30s`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct HumanDuration(pub Duration);

impl HumanDuration {
    pub fn parse(text: &str) -> Result<Self, String> {
        let text = text.trim();
        if text.is_empty() {
            return Err("empty duration".into());
        }
        let mut total = Duration::ZERO;
        let mut rest = text;
        while !rest.is_empty() {
            let digits = rest
                .find(|c: char| !(c.is_ascii_digit() || c == '.'))
                .ok_or_else(|| format!("duration {text:?} lacks a unit (ms, s, m, h)"))?;
            if digits == 0 {
                return Err(format!("duration {text:?} must start with a number"));
            }
            let number: f64 = rest[..digits]
                .parse()
                .map_err(|_| format!("bad number in duration {text:?}"))?;
            rest = &rest[digits..];
            let unit_len = rest
                .find(|c: char| c.is_ascii_digit() || c == '.')
                .unwrap_or(rest.len());
            let seconds = match &rest[..unit_len] {
                "ms" => number / 1000.0,
                "s" => number,
                "m" => number * 60.0,
                "h" => number * 3600.0,
                other => {
                    return Err(format!(
                        "unknown unit {other:?} in duration {text:?} (use ms, s, m, h)"
                    ))
                }
            };
            rest = &rest[unit_len..];
            if !seconds.is_finite() || seconds > 1e9 {
                return Err(format!("duration {text:?} is out of range"));
            }
            total += Duration::from_secs_f64(seconds);
        }
        Ok(HumanDuration(total))
    }
}

impl fmt::Display for HumanDuration {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let ms = self.0.as_millis();
        if !ms.is_multiple_of(1000) {
            write!(f, "{ms}ms")
        } else {
            write!(f, "{}s", ms / 1000)
        }
    }
}

/// Written back as it is read, so that the config's schema can show defaults.
impl Serialize for HumanDuration {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl JsonSchema for HumanDuration {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "Duration".into()
    }

    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        schemars::json_schema!({
            "type": "string",
            "description": "A duration: a number and a unit (ms, s, m, h), or several, e.g. 500ms, 10s, 2m, 1m30s.",
            "pattern": "^([0-9]+(\\.[0-9]+)?(ms|s|m|h))+$"
        })
    }
}

impl<'de> Deserialize<'de> for HumanDuration {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let text = String::deserialize(d)?;
        HumanDuration::parse(&text).map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations() {
        assert_eq!(
            HumanDuration::parse("500ms").unwrap().0,
            Duration::from_millis(500)
        );
        assert_eq!(
            HumanDuration::parse("10s").unwrap().0,
            Duration::from_secs(10)
        );
        assert_eq!(
            HumanDuration::parse("2m").unwrap().0,
            Duration::from_secs(120)
        );
        assert_eq!(
            HumanDuration::parse("1m30s").unwrap().0,
            Duration::from_secs(90)
        );
        for bad in ["", "10", "s", "10x", "-1s", "1e400s"] {
            assert!(HumanDuration::parse(bad).is_err(), "{bad:?} accepted");
        }
    }
}
