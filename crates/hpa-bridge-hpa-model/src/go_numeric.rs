//! Go's numeric conversions as the kube-controller-manager binary performs them on amd64
//! (docs/hpa-behaviour.md §1.8). Where the controller converts a float64 to int32 without a
//! range check, an out-of-range value does not saturate as Rust's `as` does: Go compiles
//! `int32(f)` to `CVTTSD2SL`, whose answer for NaN, ±Inf and anything that truncates outside
//! int32 is the "integer indefinite" `0x80000000`. Kubernetes 1.37 is built with Go 1.26.
//! Integer arithmetic on int32 and int64 wraps.

/// `int32(f)` on amd64: truncation toward zero, `i32::MIN` when out of range or NaN.
pub fn go_f64_to_i32(f: f64) -> i32 {
    let t = f.trunc();
    if t.is_nan() || t < i32::MIN as f64 || t > i32::MAX as f64 {
        i32::MIN
    } else {
        t as i32
    }
}

/// `int64(f)` on amd64 (`CVTTSD2SQ`): truncation toward zero, `i64::MIN` when out of range or
/// NaN.
pub fn go_f64_to_i64(f: f64) -> i64 {
    let t = f.trunc();
    // 2^63 is exactly representable; every float at or above it is out of range, and NaN is
    // in no range.
    if !(-9_223_372_036_854_775_808.0..9_223_372_036_854_775_808.0).contains(&t) {
        i64::MIN
    } else {
        t as i64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Each pair was printed by a Go 1.26 linux/amd64 binary converting a non-constant float64
    /// (`int32(f)`, `int64(f)`), the toolchain `k8s.io/kubernetes` v1.37.2's go.mod names.
    #[test]
    fn conversions_match_go_on_amd64() {
        let int32_cases = [
            (1e10, i32::MIN),
            (4_294_967_296.0, i32::MIN),
            (2_147_483_648.0, i32::MIN),
            (-2_147_483_649.0, i32::MIN),
            (1e30, i32::MIN),
            (-1e30, i32::MIN),
            (f64::NAN, i32::MIN),
            (f64::INFINITY, i32::MIN),
            (f64::NEG_INFINITY, i32::MIN),
            (2_147_483_647.5, i32::MAX),
            (-2_147_483_648.9, i32::MIN),
            (-7.9, -7),
            (7.9, 7),
        ];
        for (f, want) in int32_cases {
            assert_eq!(go_f64_to_i32(f), want, "int32({f})");
        }
        let int64_cases = [
            (1e10, 10_000_000_000),
            (9.3e18, i64::MIN),
            (1e19, i64::MIN),
            (f64::NAN, i64::MIN),
            (-3e9, -3_000_000_000),
        ];
        for (f, want) in int64_cases {
            assert_eq!(go_f64_to_i64(f), want, "int64({f})");
        }
    }
}
