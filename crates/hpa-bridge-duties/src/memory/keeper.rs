//! After the start (whose read hands the memory to the store, which reads targets from it as
//! they appear), counts what was read, ends the reading after `hold`, and, on the replica
//! holding the memory Lease, writes the store's memory back at a bounded rate.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::json;

use super::config_map::MemoryObject;
use crate::lease::Leadership;
use hpa_bridge_rules::clock::{rfc3339, Clock, Millis};
use hpa_bridge_store::store::{Memory, StoreWriter};
use hpa_bridge_telemetry::self_metrics::SelfMetrics;

#[derive(Clone, Copy, Debug)]
pub struct MemoryTimings {
    /// At most one write per this, and only when what is remembered changed.
    pub write_interval: Duration,
    /// How long after the start a remembered target not yet in the target set may still join
    /// it and be read from memory (discovery's first lists land well within it).
    pub hold: Duration,
}

/// What `/status` shows of the memory.
#[derive(Default)]
struct Shown {
    loaded: bool,
    read_error: Option<String>,
    written_at_read: Option<Millis>,
    read_targets: usize,
    pending_targets: usize,
    last_write: Option<Millis>,
    last_write_bytes: usize,
    last_write_error: Option<String>,
}

pub struct MemoryKeeper {
    store: StoreWriter,
    object: MemoryObject,
    leadership: Arc<Leadership>,
    clock: Arc<dyn Clock>,
    metrics: Arc<SelfMetrics>,
    timings: MemoryTimings,
    shown: Arc<Mutex<Shown>>,
}

impl MemoryKeeper {
    pub fn new(
        store: StoreWriter,
        object: MemoryObject,
        leadership: Arc<Leadership>,
        clock: Arc<dyn Clock>,
        metrics: Arc<SelfMetrics>,
        timings: MemoryTimings,
    ) -> MemoryKeeper {
        MemoryKeeper {
            store,
            object,
            leadership,
            clock,
            metrics,
            timings,
            shown: Arc::default(),
        }
    }

    /// What reading the memory at the start found: its time, or why it could not be read.
    pub fn read_at_start(&self, outcome: Result<Option<Millis>, String>) {
        let mut shown = self.shown();
        shown.loaded = outcome.is_ok();
        match outcome {
            Ok(at) => shown.written_at_read = at,
            Err(e) => shown.read_error = Some(e),
        }
    }

    /// The memory as `/status` shows it.
    pub fn status(&self) -> impl Fn() -> serde_json::Value + Send + Sync + 'static {
        let shown = self.shown.clone();
        let config_map = self.object.describe();
        let leadership = self.leadership.clone();
        move || {
            let s = shown.lock().unwrap_or_else(|e| e.into_inner());
            json!({
                "configMap": config_map,
                "loaded": s.loaded,
                "readError": s.read_error,
                "writtenAtRead": s.written_at_read.map(rfc3339),
                "targetsRead": s.read_targets,
                "targetsPending": s.pending_targets,
                "lease": leadership.status(),
                "lastWrite": s.last_write.map(rfc3339),
                "lastWriteBytes": s.last_write_bytes,
                "lastWriteError": s.last_write_error,
            })
        }
    }

    fn shown(&self) -> std::sync::MutexGuard<'_, Shown> {
        self.shown.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub fn spawn(self) -> tokio::task::JoinHandle<()> {
        tokio::spawn(self.run())
    }

    async fn run(self) {
        let started = self.clock.mono_ms();
        let hold_ms = self.timings.hold.as_millis() as Millis;
        let interval_ms = self.timings.write_interval.as_millis() as Millis;
        let mut holding = true;
        let mut read_counted = 0;
        let mut written: Option<Memory> = None;
        let mut last_write_mono: Option<Millis> = None;
        let mut tick = tokio::time::interval(Duration::from_millis(500));
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tick.tick().await;
            let mono = self.clock.mono_ms();
            let read = self.store.targets_read_from_memory();
            if read > read_counted {
                self.metrics.memory_read(read - read_counted);
                tracing::info!(
                    targets = read - read_counted,
                    "targets read from the memory"
                );
                read_counted = read;
            }
            {
                let pending = self.store.pending_memory().map_or(0, |m| m.targets.len());
                let mut shown = self.shown();
                shown.read_targets = read;
                shown.pending_targets = pending;
            }
            if holding && mono - started > hold_ms {
                holding = false;
                let left = self.store.forget_memory();
                self.shown().pending_targets = 0;
                if left > 0 {
                    tracing::info!(targets = left, "remembered targets never seen since this start, or scraped before they could be read from memory, are no longer remembered");
                }
            }
            let due = last_write_mono.is_none_or(|t| mono - t >= interval_ms);
            if !(due && self.leadership.leading()) {
                continue;
            }
            let mut memory = self.store.memory(self.clock.now_ms());
            if let Some(p) = self.store.pending_memory() {
                memory = memory.and_pending(&p);
            }
            // A value that changed is written; a time that moved alone is not, so a steady
            // cluster costs no writes.
            if written.as_ref().is_some_and(|w| w.same_values(&memory)) {
                continue;
            }
            last_write_mono = Some(mono);
            match self.object.write(&memory).await {
                Ok((bytes, left_out)) => {
                    self.metrics.memory_write("success", Some(bytes));
                    if left_out > 0 {
                        tracing::warn!(left_out, bytes, "the memory is larger than a ConfigMap may hold: its last targets are left out and count as never scraped after a restart");
                    }
                    tracing::debug!(targets = memory.targets.len(), bytes, "wrote the memory");
                    let mut shown = self.shown();
                    shown.last_write = Some(memory.written_at);
                    shown.last_write_bytes = bytes;
                    shown.last_write_error = None;
                    written = Some(memory);
                }
                Err(e) => {
                    self.metrics.memory_write(e.kind(), None);
                    let first = self
                        .shown()
                        .last_write_error
                        .replace(e.to_string())
                        .is_none();
                    if first {
                        tracing::warn!(error = %e, "writing the memory failed (needs get, create and update on that ConfigMap: manifests/base/rbac.yaml); retrying every write interval");
                    }
                }
            }
        }
    }
}
