//! A served answer's reason, written piece by piece into one buffer. Every answer served writes up
//! to three reasons (recommendation, floor, target), and through `format_args!` they would be a
//! large share of a handled request's work: each argument goes through the formatting machinery,
//! and the scope through it twice. Refusals and the rarer holds keep `format!`; only the sentences
//! of a healthy answer are written this way.

use super::observation::TextParts;

/// Something a reason is made of, appended to it as its `Display` form would be.
pub(crate) trait Piece {
    fn put(&self, s: &mut String);
}

impl Piece for &str {
    fn put(&self, s: &mut String) {
        s.push_str(self);
    }
}

impl Piece for String {
    fn put(&self, s: &mut String) {
        self.as_str().put(s);
    }
}

impl Piece for u64 {
    fn put(&self, s: &mut String) {
        s.push_str(itoa::Buffer::new().format(*self));
    }
}

impl Piece for usize {
    fn put(&self, s: &mut String) {
        (*self as u64).put(s);
    }
}

impl<T: TextParts> Piece for T {
    fn put(&self, s: &mut String) {
        self.each(|part| s.push_str(part));
    }
}

/// A reason of `pieces`, in room for a typical one.
macro_rules! reason {
    ($($piece:expr),+ $(,)?) => {{
        let mut s = String::with_capacity(192);
        $( $crate::policy::reason_text::Piece::put(&$piece, &mut s); )+
        s
    }};
}
pub(crate) use reason;

#[cfg(test)]
mod tests {
    use super::super::observation::{ScopeText, SearchedNames, SeriesNames};

    /// Each piece reads as its `Display` form, so a reason is the same text either way.
    #[test]
    fn pieces_read_as_their_display_forms() {
        let series = ["a".to_string(), "b".to_string()];
        let names = SeriesNames::of(&series);
        let scopes = [
            ScopeText::Parts("namespace", "games", ""),
            ScopeText::Parts("namespace", "games", "app=lobby,tier!=x"),
            ScopeText::Text("in a test"),
        ];
        for scope in scopes {
            for n in [0u64, 7, 10, u64::MAX] {
                let written = reason!(
                    "max of ",
                    n as usize,
                    " of ",
                    names,
                    " matching ",
                    scope,
                    " is ",
                    n
                );
                assert_eq!(
                    written,
                    format!("max of {n} of {names} matching {scope} is {n}")
                );
            }
        }
        assert_eq!(reason!(SeriesNames::of(&[])), "");
    }

    /// A reason names a metric's series once, by its first name; a reason that says nothing
    /// matched lists every name looked for.
    #[test]
    fn a_reason_names_a_series_once() {
        let one = ["hpa_expect_replicas".to_string()];
        let three = [
            "hpa_expect_replicas".to_string(),
            "hpa_expect_replicas_count".to_string(),
            "atframework_hpa_expect_replicas".to_string(),
        ];
        assert_eq!(SeriesNames::of(&three).to_string(), "hpa_expect_replicas");
        assert_eq!(SeriesNames::of(&one).to_string(), "hpa_expect_replicas");
        assert_eq!(
            SearchedNames::of(&three).to_string(),
            "hpa_expect_replicas (or hpa_expect_replicas_count, atframework_hpa_expect_replicas)"
        );
        assert_eq!(SearchedNames::of(&one).to_string(), "hpa_expect_replicas");
        assert_eq!(SearchedNames::of(&[]).to_string(), "");
    }
}
