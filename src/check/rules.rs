//! The rule catalogue: one code and title per rule; docs/check.md has a section for each.

use super::Rule;
macro_rules! rule {
    ($id:ident, $code:literal, $title:literal) => {
        pub const $id: Rule = Rule {
            code: $code,
            title: $title,
        };
    };
}
rule!(
    VALUE_PATH,
    "HB001",
    "Absolute metric through the Value path"
);
rule!(AVERAGE_VALUE_NOT_ONE, "HB002", "averageValue other than 1");
rule!(
    TYPE_MISMATCH,
    "HB003",
    "target type disagrees with the field set"
);
rule!(
    UPPER_CASE_NAME,
    "HB004",
    "Metric name with upper-case letters"
);
rule!(NOT_SERVED, "HB005", "Metric not served by hpa-bridge");
rule!(
    SELECTOR_SCOPE,
    "HB006",
    "Selector may match several workloads"
);
rule!(NO_SERIES, "HB007", "No series for the selector");
rule!(TOLERANCE, "HB008", "Tolerance swallows small steps");
rule!(
    TOLERANCE_DROPPED,
    "HB009",
    "Per-HPA tolerance dropped by the API server"
);
rule!(
    SCALE_DOWN_WINDOW,
    "HB010",
    "Scale-down window shorter than the recommender's"
);
rule!(
    SCALE_UP_TOO_SLOW,
    "HB011",
    "Scale-up policies too slow to reach maxReplicas"
);
rule!(
    MIN_REPLICAS_ZERO,
    "HB012",
    "minReplicas 0 without scale to zero"
);
rule!(
    FLOOR_ON_DEPLOYMENT,
    "HB013",
    "Stateful floor on a Deployment"
);
rule!(
    ORDINALS_START,
    "HB014",
    "StatefulSet ordinals start without offset handling"
);
rule!(NO_FLOOR, "HB015", "StatefulSet without a floor metric");
rule!(
    FOREIGN_APISERVICE,
    "HB016",
    "APIService owned by another service"
);
rule!(
    APISERVICE_UNAVAILABLE,
    "HB017",
    "APIService missing or not Available"
);
rule!(ADAPTER_REFUSES, "HB018", "Adapter refuses the metric");
rule!(SCALE_TARGET_MISSING, "HB019", "Scale target not found");
rule!(TWO_HPAS, "HB020", "Two HPAs scale one workload");
rule!(
    HPA_AND_SCALED_OBJECT,
    "HB021",
    "HPA beside a KEDA ScaledObject"
);
rule!(REPLICAS_FIXED, "HB022", "spec.replicas fixed beside an HPA");
rule!(
    RECOMMENDER_IN_WORKLOAD,
    "HB023",
    "Recommender inside a workload that scales to zero"
);
rule!(
    EXTERNAL_FLOOR_AT_ZERO,
    "HB024",
    "External target with a floor at minReplicas 0"
);

/// Every rule, in code order (docs/check.md has one section each).
pub const ALL: [Rule; 24] = [
    VALUE_PATH,
    AVERAGE_VALUE_NOT_ONE,
    TYPE_MISMATCH,
    UPPER_CASE_NAME,
    NOT_SERVED,
    SELECTOR_SCOPE,
    NO_SERIES,
    TOLERANCE,
    TOLERANCE_DROPPED,
    SCALE_DOWN_WINDOW,
    SCALE_UP_TOO_SLOW,
    MIN_REPLICAS_ZERO,
    FLOOR_ON_DEPLOYMENT,
    ORDINALS_START,
    NO_FLOOR,
    FOREIGN_APISERVICE,
    APISERVICE_UNAVAILABLE,
    ADAPTER_REFUSES,
    SCALE_TARGET_MISSING,
    TWO_HPAS,
    HPA_AND_SCALED_OBJECT,
    REPLICAS_FIXED,
    RECOMMENDER_IN_WORKLOAD,
    EXTERNAL_FLOOR_AT_ZERO,
];
