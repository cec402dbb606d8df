//! Kubernetes `resource.Quantity`: a small parser and formatter.
//!
//! The HPA reads every target and every metric item as a Quantity and works on its
//! `MilliValue()`, rounded up (away from zero) to a milli (docs/hpa-behaviour.md §1.2). The API side
//! emits item values as Quantity strings: an integer `D` gives `"D"`, a fraction gives the milli
//! form (`2.5` gives `"2500m"`), and NaN/±Inf have no Quantity form (docs/hpa-behaviour.md §2).
//!
//! Grammar accepted (as `k8s.io/apimachinery` does): an optional sign, digits with an optional
//! decimal point, then an optional suffix: binary SI (`Ki Mi Gi Ti Pi Ei`), decimal SI
//! (`n u m "" k M G T P E`) or a decimal exponent (`e3`, `E-2`).

use std::fmt;
use std::str::FromStr;

use serde::de::{self, Deserializer, Visitor};
use serde::Deserialize;

/// Largest magnitude [`format_quantity`] accepts: beyond about 9.2e15 the milli value overflows
/// an int64 on the HPA side (docs/hpa-behaviour.md §2).
pub const MAX_FORMATTABLE: f64 = 9.2e15;

/// Why a text is not a Quantity, or a number has no Quantity form.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum QuantityError {
    #[error("empty quantity")]
    Empty,
    #[error("quantity {0:?} is not well formed")]
    Invalid(String),
    #[error("quantity {0:?} is out of range (its milli value does not fit an int64)")]
    OutOfRange(String),
    #[error("{0} has no Quantity form")]
    NotFinite(f64),
}

/// A parsed Quantity: the original text, an approximate float (Go's `AsApproximateFloat64`)
/// and the exact milli value rounded away from zero (Go's `MilliValue`).
#[derive(Clone, Debug, PartialEq)]
pub struct Quantity {
    text: String,
    approx: f64,
    milli: i64,
}

impl Quantity {
    /// Parses a Quantity string such as `"1"`, `"500m"`, `"2.5"`, `"1k"`, `"1Ki"` or `"1e3"`.
    pub fn parse(text: &str) -> Result<Self, QuantityError> {
        let parts = split(text)?;
        let approx = parts.approx(text)?;
        let milli = parts.milli(text)?;
        Ok(Quantity {
            text: text.to_string(),
            approx,
            milli,
        })
    }

    /// The text as written.
    pub fn as_str(&self) -> &str {
        &self.text
    }

    /// Nearest float (Go `AsApproximateFloat64`), used for tolerances (docs/hpa-behaviour.md §1.5).
    pub fn as_f64(&self) -> f64 {
        self.approx
    }

    /// Milli value rounded away from zero (Go `MilliValue`), used for targets and items
    /// (docs/hpa-behaviour.md §1.2).
    pub fn milli_value(&self) -> i64 {
        self.milli
    }
}

impl FromStr for Quantity {
    type Err = QuantityError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Quantity::parse(s)
    }
}

impl fmt::Display for Quantity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}

/// Accepts a string (the API form) or, for hand-written YAML, a plain number.
impl<'de> Deserialize<'de> for Quantity {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct QuantityVisitor;
        impl Visitor<'_> for QuantityVisitor {
            type Value = Quantity;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a Kubernetes quantity such as \"1\", \"500m\" or \"0.1\"")
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Quantity, E> {
                Quantity::parse(v).map_err(E::custom)
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<Quantity, E> {
                Quantity::parse(&v.to_string()).map_err(E::custom)
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<Quantity, E> {
                Quantity::parse(&v.to_string()).map_err(E::custom)
            }
            fn visit_f64<E: de::Error>(self, v: f64) -> Result<Quantity, E> {
                if !v.is_finite() {
                    return Err(E::custom(QuantityError::NotFinite(v)));
                }
                Quantity::parse(&format!("{v}")).map_err(E::custom)
            }
        }
        deserializer.deserialize_any(QuantityVisitor)
    }
}

/// A quantity split into sign, significant digits, a power of ten and a power of two.
struct Parts {
    negative: bool,
    digits: String,
    exp10: i32,
    exp2: u32,
}

fn split(text: &str) -> Result<Parts, QuantityError> {
    if text.is_empty() {
        return Err(QuantityError::Empty);
    }
    let invalid = || QuantityError::Invalid(text.to_string());
    let bytes = text.as_bytes();
    let mut i = 0;
    let mut negative = false;
    if bytes[0] == b'+' || bytes[0] == b'-' {
        negative = bytes[0] == b'-';
        i = 1;
    }
    let int_start = i;
    while i < bytes.len() && bytes[i].is_ascii_digit() {
        i += 1;
    }
    let int_part = &text[int_start..i];
    let mut frac_part = "";
    if i < bytes.len() && bytes[i] == b'.' {
        i += 1;
        let frac_start = i;
        while i < bytes.len() && bytes[i].is_ascii_digit() {
            i += 1;
        }
        frac_part = &text[frac_start..i];
    }
    if int_part.is_empty() && frac_part.is_empty() {
        return Err(invalid());
    }
    let suffix = &text[i..];
    let (suffix_exp10, exp2): (i32, u32) = match suffix {
        "" => (0, 0),
        "n" => (-9, 0),
        "u" => (-6, 0),
        "m" => (-3, 0),
        "k" => (3, 0),
        "M" => (6, 0),
        "G" => (9, 0),
        "T" => (12, 0),
        "P" => (15, 0),
        "E" => (18, 0),
        "Ki" => (0, 10),
        "Mi" => (0, 20),
        "Gi" => (0, 30),
        "Ti" => (0, 40),
        "Pi" => (0, 50),
        "Ei" => (0, 60),
        s if s.len() > 1 && (s.starts_with('e') || s.starts_with('E')) => {
            let exp = &s[1..];
            let unsigned = exp.strip_prefix(['+', '-']).unwrap_or(exp);
            if unsigned.is_empty() || !unsigned.bytes().all(|b| b.is_ascii_digit()) {
                return Err(invalid());
            }
            let e: i32 = exp.parse().map_err(|_| invalid())?;
            (e, 0)
        }
        _ => return Err(invalid()),
    };
    let frac_trimmed = frac_part.trim_end_matches('0');
    let mut digits = format!("{int_part}{frac_trimmed}");
    let stripped = digits.trim_start_matches('0');
    digits = if stripped.is_empty() {
        "0".to_string()
    } else {
        stripped.to_string()
    };
    let exp10 = suffix_exp10
        .checked_sub(i32::try_from(frac_trimmed.len()).map_err(|_| invalid())?)
        .ok_or_else(invalid)?;
    Ok(Parts {
        negative,
        digits,
        exp10,
        exp2,
    })
}

impl Parts {
    fn approx(&self, text: &str) -> Result<f64, QuantityError> {
        let sign = if self.negative { "-" } else { "" };
        let v: f64 = format!("{sign}{}e{}", self.digits, self.exp10)
            .parse()
            .map_err(|_| QuantityError::Invalid(text.to_string()))?;
        Ok(v * 2f64.powi(self.exp2 as i32))
    }

    /// `ceil(|value| × 1000)` with the sign put back: rounding away from zero, as Go's
    /// `MilliValue` does.
    fn milli(&self, text: &str) -> Result<i64, QuantityError> {
        let out_of_range = || QuantityError::OutOfRange(text.to_string());
        if self.digits == "0" {
            return Ok(0);
        }
        if self.digits.len() > 38 {
            return Err(out_of_range());
        }
        let mantissa: i128 = self.digits.parse().map_err(|_| out_of_range())?;
        let scaled = mantissa
            .checked_mul(1i128.checked_shl(self.exp2).ok_or_else(out_of_range)?)
            .ok_or_else(out_of_range)?;
        let e = self.exp10 + 3;
        let magnitude: i128 = if e >= 0 {
            let factor = 10i128.checked_pow(e as u32).ok_or_else(out_of_range)?;
            scaled.checked_mul(factor).ok_or_else(out_of_range)?
        } else {
            match 10i128.checked_pow((-e) as u32) {
                Some(den) => {
                    let q = scaled / den;
                    if scaled % den != 0 {
                        q + 1
                    } else {
                        q
                    }
                }
                // Smaller than any milli, but not zero: rounds away from zero to one milli.
                None => 1,
            }
        };
        let signed = if self.negative { -magnitude } else { magnitude };
        i64::try_from(signed).map_err(|_| out_of_range())
    }
}

/// `ceil(|v| × 1000)` with the sign put back, for item values given as floats (docs/hpa-behaviour.md
/// §1.2). A float that is a milli-integer up to representation error (such as `0.1 × 1000 =
/// 100.00000000000001`) counts as that integer, so a value parsed from `"100m"` keeps its
/// exact milli value. `None` for NaN, ±Inf, or when the milli value overflows an int64.
pub fn milli_ceil(v: f64) -> Option<i64> {
    if !v.is_finite() {
        return None;
    }
    let m = (v * 1000.0).abs();
    let nearest = m.round();
    let magnitude = if (m - nearest).abs() <= 1e-9 * nearest.max(1.0) {
        nearest
    } else {
        m.ceil()
    };
    if magnitude >= 9.223_372_036_854_775e18 {
        return None;
    }
    let magnitude = magnitude as i64;
    Some(if v < 0.0 { -magnitude } else { magnitude })
}

/// Formats a number as a Quantity string for an `ExternalMetricValue` (docs/hpa-behaviour.md §2).
///
/// - Integers are written exactly as decimal digits: `7` gives `"7"`, `1000` gives `"1000"`
///   (the API server's canonical form would be `"1k"`; any well-formed form parses).
/// - Fractions use the coarsest exact form among milli, micro and nano: `2.5` gives
///   `"2500m"`, `0.0000015` gives `"1500n"`; anything finer is rounded away from zero to a nano.
/// - NaN and ±Inf have no Quantity form, and magnitudes of [`MAX_FORMATTABLE`] or more would
///   overflow the HPA's milli value: both are errors.
pub fn format_quantity(v: f64) -> Result<String, QuantityError> {
    if !v.is_finite() {
        return Err(QuantityError::NotFinite(v));
    }
    if v.abs() >= MAX_FORMATTABLE {
        return Err(QuantityError::OutOfRange(format!("{v}")));
    }
    if v.fract() == 0.0 {
        return Ok(format!("{}", v as i64));
    }
    for (scale, suffix) in [(1e3, "m"), (1e6, "u"), (1e9, "n")] {
        let s = v * scale;
        let nearest = s.round();
        if (s - nearest).abs() <= 1e-9 * nearest.abs().max(1.0) {
            return Ok(format!("{}{suffix}", nearest as i64));
        }
    }
    let n = v * 1e9;
    let away = if n < 0.0 { n.floor() } else { n.ceil() };
    Ok(format!("{}n", away as i64))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn milli(s: &str) -> i64 {
        Quantity::parse(s).unwrap().milli_value()
    }

    #[test]
    fn parses_the_common_forms() {
        assert_eq!(milli("1"), 1000);
        assert_eq!(milli("500m"), 500);
        assert_eq!(milli("2.5"), 2500);
        assert_eq!(milli("1k"), 1_000_000);
        assert_eq!(milli("1Ki"), 1_024_000);
        assert_eq!(milli("1e3"), 1_000_000);
        assert_eq!(milli("1E-3"), 1);
        assert_eq!(milli("+7"), 7000);
        assert_eq!(milli("-2500m"), -2500);
        assert_eq!(milli(".5"), 500);
        assert_eq!(milli("0"), 0);
        assert_eq!(milli("100m"), 100);
        assert_eq!(milli("0.1"), 100);
        assert_eq!(milli("1P"), 1_000_000_000_000_000_000);
        assert!(
            Quantity::parse("1E").is_err(),
            "1E is 1e21 milli: overflows int64"
        );
    }

    #[test]
    fn milli_value_rounds_away_from_zero() {
        // docs/hpa-behaviour.md §1.2: each item's MilliValue() is rounded up to a milli.
        assert_eq!(milli("1.0001"), 1001);
        assert_eq!(milli("1500u"), 2);
        assert_eq!(milli("1n"), 1);
        assert_eq!(milli("-1n"), -1);
        assert_eq!(milli("10.2"), 10_200);
    }

    #[test]
    fn approximate_float_matches() {
        assert_eq!(Quantity::parse("0.1").unwrap().as_f64(), 0.1);
        assert_eq!(Quantity::parse("100m").unwrap().as_f64(), 0.1);
        assert_eq!(Quantity::parse("0").unwrap().as_f64(), 0.0);
        assert_eq!(Quantity::parse("2Ki").unwrap().as_f64(), 2048.0);
    }

    #[test]
    fn rejects_malformed_text() {
        for bad in [
            "", "abc", "1.2.3", "1kk", "m", "1 k", "--1", "1e", "1e+", "0x10", "1K",
        ] {
            assert!(Quantity::parse(bad).is_err(), "{bad:?} should not parse");
        }
        assert!(matches!(
            Quantity::parse("10E"),
            Err(QuantityError::OutOfRange(_))
        ));
    }

    #[test]
    fn formats_integers_exactly_and_fractions_in_milli() {
        assert_eq!(format_quantity(7.0).unwrap(), "7");
        assert_eq!(format_quantity(0.0).unwrap(), "0");
        assert_eq!(format_quantity(1000.0).unwrap(), "1000");
        assert_eq!(format_quantity(-3.0).unwrap(), "-3");
        assert_eq!(format_quantity(2.5).unwrap(), "2500m");
        assert_eq!(format_quantity(0.1).unwrap(), "100m");
        assert_eq!(format_quantity(1.5e-6).unwrap(), "1500n");
        assert_eq!(
            format_quantity(9_000_000_000_000_000.0).unwrap(),
            "9000000000000000"
        );
    }

    #[test]
    fn refuses_values_without_a_quantity_form() {
        assert!(format_quantity(f64::NAN).is_err());
        assert!(format_quantity(f64::INFINITY).is_err());
        assert!(format_quantity(f64::NEG_INFINITY).is_err());
        assert!(format_quantity(1e16).is_err());
    }

    #[test]
    fn float_milli_ceil() {
        assert_eq!(milli_ceil(0.1), Some(100));
        assert_eq!(milli_ceil(10.2), Some(10_200));
        assert_eq!(milli_ceil(1.0001), Some(1001));
        assert_eq!(milli_ceil(-1.0001), Some(-1001));
        assert_eq!(milli_ceil(f64::NAN), None);
    }

    #[test]
    fn deserializes_from_string_or_number() {
        let q: Quantity = yaml_serde::from_str("\"500m\"").unwrap();
        assert_eq!(q.milli_value(), 500);
        let q: Quantity = yaml_serde::from_str("5").unwrap();
        assert_eq!(q.milli_value(), 5000);
        let q: Quantity = yaml_serde::from_str("0.05").unwrap();
        assert_eq!(q.as_f64(), 0.05);
        assert!(yaml_serde::from_str::<Quantity>("\"five\"").is_err());
    }

    proptest! {
        #[test]
        fn formatted_values_parse_back(milli_in in -9_000_000_000_000i64..9_000_000_000_000i64) {
            let v = milli_in as f64 / 1000.0;
            let text = format_quantity(v).unwrap();
            let q = Quantity::parse(&text).unwrap();
            prop_assert_eq!(q.milli_value(), milli_in);
        }

        #[test]
        fn integers_format_as_digits(n in -1_000_000_000i64..1_000_000_000i64) {
            prop_assert_eq!(format_quantity(n as f64).unwrap(), n.to_string());
        }
    }
}
