//! What one in-process `hpa_target_replicas` answer (`Adapter::answer`, no HTTP) costs over a
//! large store against a small one, measured alternately in the same run so the machine's
//! changing load falls on both alike.

use std::time::{Duration, Instant};

use serde::Serialize;

use super::{BenchError, InPart};
use hpa_bridge_engine::engine::{Adapter, MetricQuery, ObjectKind, ObjectRef};
use hpa_bridge_rules::selector::LabelSelector;

const METRIC: &str = "hpa_target_replicas";

/// Which API's query is measured: the External one with a selector naming the workload, or
/// the Object one naming the StatefulSet (custom.metrics.k8s.io).
#[derive(Clone, Copy, Debug)]
pub enum Front {
    External,
    Object,
}

impl Front {
    pub(super) fn query(self, w: usize) -> Result<MetricQuery, BenchError> {
        Ok(match self {
            Front::External => {
                let selector = LabelSelector::parse(&format!("hpa_target_name=w{w}")).part(PART)?;
                MetricQuery::external(METRIC, "default", selector)
            }
            Front::Object => {
                let object = ObjectRef {
                    kind: ObjectKind::StatefulSet,
                    namespace: "default".into(),
                    name: format!("w{w}"),
                };
                MetricQuery::object(METRIC, object, LabelSelector::everything())
            }
        })
    }
}
/// Each side runs this long before the other takes over.
const SLICE: Duration = Duration::from_millis(20);

#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct AnswerCost {
    pub small_targets: usize,
    /// Series in one answer's scope over the large store.
    pub large_scope_series: usize,
    /// Mean microseconds per answer over the large store.
    pub large_us: f64,
    pub large_answers: u64,
    /// The small store whose workload has as many series in scope as one of the large store's
    /// (its pods export more of them), so the two differ only in the size of the store.
    pub small_scope_series: usize,
    /// Mean microseconds per answer over that small store.
    pub small_us: f64,
    pub small_answers: u64,
    /// large / small: what the size of the store costs one answer.
    pub ratio: f64,
    /// The small store with as many series per pod as the large one's, so fewer in scope.
    pub few_scope_series: usize,
    pub few_us: f64,
    pub few_answers: u64,
    /// large / few: the size of the store and of the scope together.
    pub few_ratio: f64,
    /// How long each side ran.
    pub budget_seconds: f64,
}

const PART: &str = "answer cost";

/// One store measured: its adapter, the queries of its workloads (asked round-robin) and its
/// tally.
pub struct Side<'a> {
    adapter: &'a Adapter,
    queries: Vec<MetricQuery>,
    answers: u64,
    spent: Duration,
}

impl<'a> Side<'a> {
    /// Every workload must be answered with a value, so every side does the whole computation
    /// (a refusal can be cheaper than an answer).
    pub async fn new(
        adapter: &'a Adapter,
        workloads: usize,
        front: Front,
    ) -> Result<Side<'a>, BenchError> {
        let mut queries = Vec::with_capacity(workloads);
        for w in 0..workloads.max(1) {
            let query = front.query(w)?;
            let answer = adapter.answer_computed(&query).await.part(PART)?;
            if answer.value().is_none() {
                return Err(BenchError::part(
                    PART,
                    format!(
                        "w{w} was refused: {}",
                        hpa_bridge_rules::policy::summary(&answer)
                    ),
                ));
            }
            queries.push(query);
        }
        Ok(Side {
            adapter,
            queries,
            answers: 0,
            spent: Duration::ZERO,
        })
    }

    async fn slice(&mut self) -> Result<(), BenchError> {
        let started = Instant::now();
        while started.elapsed() < SLICE {
            let query = &self.queries[self.answers as usize % self.queries.len()];
            let answer = self.adapter.answer_computed(query).await.part(PART)?;
            std::hint::black_box(answer);
            self.answers += 1;
        }
        self.spent += started.elapsed();
        Ok(())
    }

    fn mean_us(&self) -> f64 {
        self.spent.as_secs_f64() * 1e6 / self.answers.max(1) as f64
    }
}

/// The three stores compared, with the series in one answer's scope on each.
pub struct Sides<'a> {
    pub large: (Side<'a>, usize),
    pub small: (Side<'a>, usize),
    pub few: (Side<'a>, usize),
    pub small_targets: usize,
}

/// Answers over each side, alternating slices until each has run for `budget`.
pub async fn compare(sides: Sides<'_>, budget: Duration) -> Result<AnswerCost, BenchError> {
    let Sides {
        large: (mut large, large_scope_series),
        small: (mut small, small_scope_series),
        few: (mut few, few_scope_series),
        small_targets,
    } = sides;
    while large.spent < budget || small.spent < budget || few.spent < budget {
        large.slice().await?;
        small.slice().await?;
        few.slice().await?;
    }
    Ok(AnswerCost {
        small_targets,
        large_scope_series,
        large_us: large.mean_us(),
        large_answers: large.answers,
        small_scope_series,
        small_us: small.mean_us(),
        small_answers: small.answers,
        ratio: large.mean_us() / small.mean_us(),
        few_scope_series,
        few_us: few.mean_us(),
        few_answers: few.answers,
        few_ratio: large.mean_us() / few.mean_us(),
        budget_seconds: budget.as_secs_f64(),
    })
}
