//! What one in-process `hpa_target_replicas` answer (`Adapter::answer`, no HTTP) costs over a
//! large store against a small one, measured alternately in the same run so the machine's
//! changing load falls on both alike.

use std::time::{Duration, Instant};

use serde::Serialize;

use super::BenchError;
use hpa_bridge::engine::Adapter;
use hpa_bridge::selector::LabelSelector;

const METRIC: &str = "hpa_target_replicas";
/// Each side runs this long before the other takes over.
const SLICE: Duration = Duration::from_millis(20);

#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct AnswerCost {
    pub small_targets: usize,
    /// Mean microseconds per answer over the small store.
    pub small_us: f64,
    pub small_answers: u64,
    /// Mean microseconds per answer over the large store.
    pub large_us: f64,
    pub large_answers: u64,
    /// large / small.
    pub ratio: f64,
    /// How long each side ran.
    pub budget_seconds: f64,
}

fn err(e: impl std::fmt::Display) -> BenchError {
    BenchError::part("answer cost", e)
}

/// One side: its adapter, the selectors of its workloads (asked round-robin) and its tally.
struct Side<'a> {
    adapter: &'a Adapter,
    selectors: Vec<LabelSelector>,
    answers: u64,
    spent: Duration,
}

impl<'a> Side<'a> {
    /// Every workload must be answered with a value, so both sides do the whole computation
    /// (a refusal can be cheaper than an answer).
    async fn new(adapter: &'a Adapter, workloads: usize) -> Result<Side<'a>, BenchError> {
        let mut selectors = Vec::with_capacity(workloads);
        for w in 0..workloads.max(1) {
            let selector = LabelSelector::parse(&format!("hpa_target_name=w{w}")).map_err(err)?;
            let answer = adapter
                .answer(METRIC, "default", &selector)
                .await
                .map_err(err)?;
            if answer.value().is_none() {
                return Err(err(format!(
                    "w{w} was refused: {}",
                    hpa_bridge::policy::summary(&answer)
                )));
            }
            selectors.push(selector);
        }
        Ok(Side {
            adapter,
            selectors,
            answers: 0,
            spent: Duration::ZERO,
        })
    }

    async fn slice(&mut self) -> Result<(), BenchError> {
        let started = Instant::now();
        while started.elapsed() < SLICE {
            let selector = &self.selectors[self.answers as usize % self.selectors.len()];
            let answer = self
                .adapter
                .answer(METRIC, "default", selector)
                .await
                .map_err(err)?;
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

/// Answers over `small` and `large` (workloads `w0..`), alternating slices until each side has
/// run for `budget`.
pub async fn compare(
    small: &Adapter,
    small_targets: usize,
    small_workloads: usize,
    large: &Adapter,
    large_workloads: usize,
    budget: Duration,
) -> Result<AnswerCost, BenchError> {
    let mut small = Side::new(small, small_workloads).await?;
    let mut large = Side::new(large, large_workloads).await?;
    while small.spent < budget || large.spent < budget {
        small.slice().await?;
        large.slice().await?;
    }
    Ok(AnswerCost {
        small_targets,
        small_us: small.mean_us(),
        small_answers: small.answers,
        large_us: large.mean_us(),
        large_answers: large.answers,
        ratio: large.mean_us() / small.mean_us(),
        budget_seconds: budget.as_secs_f64(),
    })
}
