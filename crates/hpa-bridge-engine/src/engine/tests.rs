//! A scraped sample ages on the monotonic clock, a sample whose producer wrote its time ages
//! on the wall clock (clock.rs): steps of the wall clock must neither keep a dead exporter's
//! value fresh nor make a live one stale.

use super::MetricQuery;
use std::sync::Arc;

use super::Adapter;
use hpa_bridge_rules::clock::{Clock, ManualClock, Millis};
use hpa_bridge_rules::config::Config;
use hpa_bridge_rules::policy::{Answer, RefusalKind};
use hpa_bridge_rules::selector::LabelSelector;
use hpa_bridge_store::store::StoreWriter;
use hpa_bridge_telemetry::self_metrics::SelfMetrics;

/// Pods of `games/lobby`: more than a served answer notes, so the store summarizes the rest
/// (store/family_digest.rs) and both readings of age are exercised.
const PODS: usize = 12;

struct Fixture {
    clock: Arc<ManualClock>,
    adapter: Adapter,
    store: StoreWriter,
}

impl Fixture {
    fn new() -> Fixture {
        let clock = Arc::new(ManualClock::new(1_000_000));
        let store = StoreWriter::default();
        let adapter = Adapter::new(
            Config::from_yaml("").unwrap(),
            store.reader(),
            None,
            clock.clone(),
            Arc::new(SelfMetrics::new()),
        );
        store.set_targets(super::fixtures::lobby_pods(PODS));
        Fixture {
            clock,
            adapter,
            store,
        }
    }

    fn store(&self) -> StoreWriter {
        self.store.clone()
    }

    /// Every pod scraped now, recommending 2; `stamped` pages carry the time they were
    /// measured, as the producer's clock (here the wall clock) read it.
    fn scrape(&self, stamped: bool) {
        let store = self.store();
        for t in super::fixtures::lobby_pods(PODS) {
            let mut page = super::fixtures::workload_page("StatefulSet", "lobby", 2.0, 0.0);
            if stamped {
                for s in &mut page {
                    s.timestamp_ms = Some(self.clock.now_ms());
                }
            }
            store.record_success(&t, self.clock.now(), 1, page);
        }
    }

    async fn answer(&self) -> Answer {
        let selector = LabelSelector::parse("hpa_target_name=lobby").unwrap();
        self.adapter
            .answer_computed(&MetricQuery::external(
                "hpa_expect_replicas",
                "games",
                selector,
            ))
            .await
            .unwrap()
            .answer
            .clone()
    }

    fn stale_after(&self) -> Millis {
        self.adapter.stale_after_ms()
    }
}

#[tokio::test]
async fn a_scraped_sample_turns_stale_on_the_monotonic_clock_when_the_wall_clock_steps_back() {
    let f = Fixture::new();
    f.scrape(false);
    assert_eq!(f.answer().await.value(), Some(2));
    // The wall clock steps back by more than staleAfter while staleAfter passes: on the wall
    // clock the samples would read as not a second old.
    f.clock.step_wall(-(f.stale_after() + 60_000));
    f.clock.advance(f.stale_after() + 1);
    let a = f.answer().await;
    assert_eq!(a.refusal(), Some(RefusalKind::Stale), "{a:?}");
    // The age given is the monotonic one.
    let age = format!("newest is {}s old", f.stale_after() / 1000);
    assert!(a.reason.contains(&age), "{}", a.reason);
}

#[tokio::test]
async fn stepping_the_wall_clock_forward_does_not_age_a_just_scraped_sample() {
    let f = Fixture::new();
    f.scrape(false);
    f.clock.step_wall(10 * f.stale_after());
    let a = f.answer().await;
    assert_eq!(a.value(), Some(2), "{a:?}");
    assert_eq!(
        hpa_bridge_rules::policy::InputCounts::of(&a).fresh,
        PODS as u32
    );
}

#[tokio::test]
async fn a_sample_with_its_own_timestamp_ages_on_the_wall_clock() {
    let f = Fixture::new();
    f.scrape(true);
    assert_eq!(f.answer().await.value(), Some(2));
    // No time passes here, but the producer's clock says staleAfter has.
    f.clock.step_wall(f.stale_after() + 1);
    let a = f.answer().await;
    assert_eq!(a.refusal(), Some(RefusalKind::Stale), "{a:?}");
}
