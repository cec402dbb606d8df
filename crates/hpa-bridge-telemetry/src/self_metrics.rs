//! The adapter's own Prometheus metrics (`/metrics`): one registry every layer counts into,
//! every label value escaped, a target's series dropped with the target.

use prometheus_client::encoding::{EncodeLabelSet, EncodeLabelValue, LabelValueEncoder};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{exponential_buckets, Histogram};
use prometheus_client::registry::{Metric, Registry};

use hpa_bridge_store::store::TargetId;

/// A label value of the adapter's own metrics. prometheus-client writes label values as given,
/// so a target URL or id holding `"`, `\` or a line feed would end the value early and make
/// the whole page unparsable (`promtool check metrics` refuses it); this type escapes them as
/// the text format requires. Every label set below holds only these, so no value can skip it.
#[derive(Clone, Debug, Hash, PartialEq, Eq, PartialOrd, Ord)]
struct LabelValue(Box<str>);

impl From<&str> for LabelValue {
    fn from(v: &str) -> Self {
        LabelValue(v.into())
    }
}

impl From<String> for LabelValue {
    fn from(v: String) -> Self {
        LabelValue(v.into())
    }
}

impl EncodeLabelValue for LabelValue {
    fn encode(&self, encoder: &mut LabelValueEncoder) -> std::fmt::Result {
        use std::fmt::Write;
        let mut rest = &*self.0;
        while let Some(at) = rest.find(['\\', '"', '\n']) {
            encoder.write_str(&rest[..at])?;
            encoder.write_str(match rest.as_bytes()[at] {
                b'\\' => "\\\\",
                b'"' => "\\\"",
                _ => "\\n",
            })?;
            rest = &rest[at + 1..];
        }
        encoder.write_str(rest)
    }
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ScrapeErrorLabels {
    target: LabelValue,
    reason: LabelValue,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct RequestLabels {
    code: LabelValue,
    metric: LabelValue,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct MetricLabel {
    metric: LabelValue,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct AnswerLabels {
    metric: LabelValue,
    outcome: LabelValue,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct OutcomeLabel {
    outcome: LabelValue,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ResultLabel {
    result: LabelValue,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct HpaLabels {
    namespace: LabelValue,
    hpa: LabelValue,
}

fn hpa_labels(namespace: &str, hpa: &str) -> HpaLabels {
    HpaLabels {
        namespace: namespace.into(),
        hpa: hpa.into(),
    }
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ListenerLabel {
    listener: LabelValue,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ConnectionLabels {
    listener: LabelValue,
    reason: LabelValue,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, PartialOrd, Ord, EncodeLabelSet)]
struct ScopeLabels {
    namespace: LabelValue,
    metric: LabelValue,
    workload: LabelValue,
}

/// The newest state of one tracked scope, as the per-scope gauges show it.
#[derive(Clone, Debug, PartialEq)]
pub struct ScopeGauges {
    pub namespace: String,
    pub metric: String,
    pub workload: String,
    pub refusing: bool,
    /// Seconds since the epoch at which the current run of refusals began.
    pub refusing_since_seconds: Option<f64>,
    pub floor_holds: bool,
}

/// The families that mean something only with the Prometheus source.
/// The HPA predictions' families: left out when `serve` predicts no HPA.
pub const HPA_PREDICTION_FAMILIES: [&str; 3] = [
    "hpas_predicted",
    "hpa_prediction_checks",
    "hpa_prediction_misses",
];

pub const PROMETHEUS_FAMILIES: [&str; 4] = [
    "prometheus_queries",
    "prometheus_query_duration_seconds",
    "prometheus_up",
    "prometheus_query_cache_hits",
];

fn latency_histogram() -> Histogram {
    Histogram::new(exponential_buckets(0.0001, 2.5, 14))
}

/// Every family of the adapter's own metrics, in the order the exposition lists them, with its
/// help text.
const FAMILIES: &[(&str, &str)] = &[
    (
        "scrape_duplicate_series",
        "Series found twice in one scraped page (same name and labels); their values are not used until a page holds them once",
    ),
    (
        "scrape_out_of_order_series",
        "Series whose sample on a scraped page was timestamped before the sample they held (Prometheus rejects such samples); they read as unknown until a sample in order arrives",
    ),
    (
        "scrape_forgotten_series",
        "Series no longer exported that were dropped because their target stopped exporting more than the store retains per target (a target churning label sets)",
    ),
    (
        "prometheus_queries",
        "PromQL queries actually sent to the Prometheus source, by outcome",
    ),
    (
        "prometheus_query_duration_seconds",
        "Latency of PromQL queries sent to the Prometheus source",
    ),
    (
        "prometheus_up",
        "1 while the newest query to the Prometheus source succeeded, 0 after a failure",
    ),
    (
        "prometheus_query_cache_hits",
        "PromQL queries answered from the cache or by joining an identical query in flight",
    ),
    (
        "scrape_duration_seconds",
        "Duration of single target scrapes",
    ),
    (
        "scrape_round_duration_seconds",
        "Duration of a scrape round over all targets at once (the first, at startup; afterwards each target is scraped at its own phase of the interval)",
    ),
    (
        "scrape_errors",
        "Failed scrapes by target and reason",
    ),
    (
        "samples_scraped",
        "Wanted samples parsed from scrapes",
    ),
    ("series", "Tracked input series"),
    (
        "stale_series",
        "Tracked input series older than staleAfter",
    ),
    (
        "targets",
        "Configured or discovered scrape targets",
    ),
    (
        "requests",
        "External metrics API requests by HTTP code and metric",
    ),
    (
        "request_duration_seconds",
        "External metrics API request latency by metric",
    ),
    (
        "answers",
        "Answers computed by metric and outcome (value or refusal kind)",
    ),
    (
        "connections",
        "Open client connections by listener (api, metrics)",
    ),
    (
        "connections_refused",
        "Client connections closed at accept by a connection cap or a client's penalty, by listener and reason",
    ),
    (
        "connections_expired",
        "Client connections closed by the server for sending no request in time \
             (tls-handshake-timeout, header-timeout, idle-timeout) or because its address struck out \
             (penalized), by listener",
    ),
    (
        "clients_penalized",
        "Times a client address struck out and began a penalty (kept out for a while), by listener and \
             the last strike (tls-handshake-timeout, header-timeout, head-too-large)",
    ),
    (
        "clients_dropped",
        "Penalized client addresses whose TCP segments the kernel drops before accept, by listener \
             (IPv4 addresses, at most 1024; the others are refused at accept)",
    ),
    (
        "ready",
        "1 once the first scrape round has completed and /readyz answers ok, else 0",
    ),
    (
        "scope_refusing",
        "1 while the newest answer served for the scope is a refusal (the HPA holds its replicas: scale-in is frozen)",
    ),
    (
        "scope_refusing_since_timestamp_seconds",
        "When the current run of refusals for the scope began; present only while refusing",
    ),
    (
        "scope_floor_above_recommendation",
        "1 while the stateful floor, not the recommendation, sets the served target",
    ),
    (
        "history_scopes",
        "Scopes tracked in the answer history (and in the per-scope gauges)",
    ),
    (
        "history_scopes_dropped",
        "Scopes dropped from the answer history and the per-scope gauges by history.maxScopes",
    ),
    (
        "deletion_cost_patches",
        "Patches of controller.kubernetes.io/pod-deletion-cost sent, by result (success, or the failure's kind)",
    ),
    (
        "deletion_cost_leader",
        "1 while this replica holds the deletion-cost Lease and may write pod-deletion-cost, else 0",
    ),
    (
        "memory_writes",
        "Writes of the memory ConfigMap (which targets carried which series, for a restart), by result (success, or the failure's kind)",
    ),
    (
        "memory_writer",
        "1 while this replica holds the memory Lease and writes the memory, else 0",
    ),
    (
        "memory_bytes",
        "Size of the memory this replica last wrote, in bytes",
    ),
    (
        "memory_read_targets",
        "Targets this process read from the memory at its start (never scraped since, still the same target)",
    ),
    (
        "hpas_predicted",
        "HPAs whose next sync the adapter predicts (those reading its metrics, and those in shadow mode)",
    ),
    (
        "hpa_prediction_checks",
        "Predictions of an HPA's next sync checked against the desiredReplicas it then set, by result (hit or miss)",
    ),
    (
        "hpa_prediction_misses",
        "Checked syncs in a row in which the HPA did not set the desiredReplicas predicted for it (0 after a hit)",
    ),
];

/// `metric`, registered under `name` with its help from `FAMILIES`.
fn registered<M: Metric + Clone>(registry: &mut Registry, name: &'static str, metric: M) -> M {
    let help = FAMILIES
        .iter()
        .find(|(n, _)| *n == name)
        .map_or("", |(_, h)| h);
    registry.register(name, help, metric.clone());
    metric
}

pub struct SelfMetrics {
    registry: Registry,
    pub scrape_duration: Histogram,
    pub scrape_round_duration: Histogram,
    scrape_errors: Family<ScrapeErrorLabels, Counter>,
    /// The reasons each target has a `scrape_errors` series for, so that a target's series go
    /// when it does. Its lock is held while a series is added, so none escapes the index.
    scrape_error_reasons: std::sync::Mutex<foldhash::HashMap<TargetId, Vec<&'static str>>>,
    pub samples_scraped: Counter,
    pub duplicate_series: Counter,
    pub out_of_order_series: Counter,
    pub forgotten_series: Counter,
    pub series: Gauge,
    pub stale_series: Gauge,
    pub targets: Gauge,
    requests: Family<RequestLabels, Counter>,
    request_duration: Family<MetricLabel, Histogram, fn() -> Histogram>,
    answers: Family<AnswerLabels, Counter>,
    /// Handles into `requests`, `request_duration` and `answers`, by metric label.
    served: std::sync::RwLock<foldhash::HashMap<Box<str>, ServedSeries>>,
    prometheus_queries: Family<OutcomeLabel, Counter>,
    pub prometheus_query_duration: Histogram,
    /// 1 while the newest Prometheus query succeeded, 0 after a failure.
    pub prometheus_up: Gauge,
    pub prometheus_cache_hits: Counter,
    connections: Family<ListenerLabel, Gauge>,
    connections_refused: Family<ConnectionLabels, Counter>,
    connections_expired: Family<ConnectionLabels, Counter>,
    clients_penalized: Family<ConnectionLabels, Counter>,
    clients_dropped: Family<ListenerLabel, Gauge>,
    /// 1 once the first scrape round completed (what /readyz answers), else 0.
    pub ready: Gauge,
    scope_refusing: Family<ScopeLabels, Gauge>,
    scope_refusing_since: Family<ScopeLabels, Gauge<f64, std::sync::atomic::AtomicU64>>,
    scope_floor_holds: Family<ScopeLabels, Gauge>,
    history_scopes: Gauge,
    history_scopes_dropped: Counter,
    deletion_cost_patches: Family<ResultLabel, Counter>,
    deletion_cost_leader: Gauge,
    memory_writes: Family<ResultLabel, Counter>,
    memory_writer: Gauge,
    memory_bytes: Gauge,
    memory_read_targets: Gauge,
    hpas_predicted: Gauge,
    hpa_prediction_checks: Family<ResultLabel, Counter>,
    hpa_prediction_misses: Family<HpaLabels, Gauge>,
    /// Gauge families that mean nothing for the active source (e.g. `targets` with the
    /// Prometheus source): left out of the exposition rather than shown as 0.
    absent: std::sync::Mutex<std::collections::BTreeSet<&'static str>>,
}

/// One metric label's request and answer series, kept as handles (each shares its series with the
/// family), so counting a request builds no label strings and hashes none into a family, which
/// would be most of the self-metrics' cost per request. The label values are bounded (configured
/// metric names or `-`, response codes, refusal kinds), so the memo is.
#[derive(Default)]
struct ServedSeries {
    duration: Option<Histogram>,
    requests: Vec<(u16, Counter)>,
    answers: Vec<(Box<str>, Counter)>,
}

impl std::fmt::Debug for SelfMetrics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("SelfMetrics")
    }
}

impl Default for SelfMetrics {
    fn default() -> Self {
        Self::new()
    }
}

impl SelfMetrics {
    pub fn new() -> Self {
        let mut registry = Registry::with_prefix("hpa_bridge");
        let r = &mut registry;
        SelfMetrics {
            duplicate_series: registered(r, "scrape_duplicate_series", Counter::default()),
            out_of_order_series: registered(r, "scrape_out_of_order_series", Counter::default()),
            forgotten_series: registered(r, "scrape_forgotten_series", Counter::default()),
            prometheus_queries: registered(
                r,
                "prometheus_queries",
                Family::<OutcomeLabel, Counter>::default(),
            ),
            prometheus_query_duration: registered(
                r,
                "prometheus_query_duration_seconds",
                latency_histogram(),
            ),
            prometheus_up: registered(r, "prometheus_up", Gauge::default()),
            prometheus_cache_hits: registered(r, "prometheus_query_cache_hits", Counter::default()),
            scrape_duration: registered(
                r,
                "scrape_duration_seconds",
                Histogram::new(exponential_buckets(0.001, 2.0, 14)),
            ),
            scrape_round_duration: registered(
                r,
                "scrape_round_duration_seconds",
                Histogram::new(exponential_buckets(0.01, 2.0, 12)),
            ),
            scrape_errors: registered(
                r,
                "scrape_errors",
                Family::<ScrapeErrorLabels, Counter>::default(),
            ),
            samples_scraped: registered(r, "samples_scraped", Counter::default()),
            series: registered(r, "series", Gauge::default()),
            stale_series: registered(r, "stale_series", Gauge::default()),
            targets: registered(r, "targets", Gauge::default()),
            requests: registered(r, "requests", Family::<RequestLabels, Counter>::default()),
            request_duration: registered(
                r,
                "request_duration_seconds",
                Family::<MetricLabel, Histogram, fn() -> Histogram>::new_with_constructor(
                    latency_histogram,
                ),
            ),
            answers: registered(r, "answers", Family::<AnswerLabels, Counter>::default()),
            connections: registered(r, "connections", Family::<ListenerLabel, Gauge>::default()),
            connections_refused: registered(
                r,
                "connections_refused",
                Family::<ConnectionLabels, Counter>::default(),
            ),
            connections_expired: registered(
                r,
                "connections_expired",
                Family::<ConnectionLabels, Counter>::default(),
            ),
            clients_penalized: registered(
                r,
                "clients_penalized",
                Family::<ConnectionLabels, Counter>::default(),
            ),
            clients_dropped: registered(
                r,
                "clients_dropped",
                Family::<ListenerLabel, Gauge>::default(),
            ),
            ready: registered(r, "ready", Gauge::default()),
            scope_refusing: registered(
                r,
                "scope_refusing",
                Family::<ScopeLabels, Gauge>::default(),
            ),
            scope_refusing_since: registered(
                r,
                "scope_refusing_since_timestamp_seconds",
                Family::<ScopeLabels, Gauge<f64, std::sync::atomic::AtomicU64>>::default(),
            ),
            scope_floor_holds: registered(
                r,
                "scope_floor_above_recommendation",
                Family::<ScopeLabels, Gauge>::default(),
            ),
            history_scopes: registered(r, "history_scopes", Gauge::default()),
            history_scopes_dropped: registered(r, "history_scopes_dropped", Counter::default()),
            deletion_cost_patches: registered(
                r,
                "deletion_cost_patches",
                Family::<ResultLabel, Counter>::default(),
            ),
            deletion_cost_leader: registered(r, "deletion_cost_leader", Gauge::default()),
            memory_writes: registered(
                r,
                "memory_writes",
                Family::<ResultLabel, Counter>::default(),
            ),
            memory_writer: registered(r, "memory_writer", Gauge::default()),
            memory_bytes: registered(r, "memory_bytes", Gauge::default()),
            memory_read_targets: registered(r, "memory_read_targets", Gauge::default()),
            hpas_predicted: registered(r, "hpas_predicted", Gauge::default()),
            hpa_prediction_checks: registered(
                r,
                "hpa_prediction_checks",
                Family::<ResultLabel, Counter>::default(),
            ),
            hpa_prediction_misses: registered(
                r,
                "hpa_prediction_misses",
                Family::<HpaLabels, Gauge>::default(),
            ),
            scrape_error_reasons: Default::default(),
            served: Default::default(),
            absent: Default::default(),
            registry,
        }
    }

    /// One deletion-cost patch sent and how it ended.
    pub fn deletion_cost_patch(&self, result: &'static str) {
        self.deletion_cost_patches
            .get_or_create(&ResultLabel {
                result: result.into(),
            })
            .inc();
    }

    /// Whether this replica holds the deletion-cost Lease.
    pub fn deletion_cost_leader(&self, leading: bool) {
        self.deletion_cost_leader.set(i64::from(leading));
    }

    /// Whether this replica holds the memory Lease.
    pub fn memory_writer(&self, leading: bool) {
        self.memory_writer.set(i64::from(leading));
    }

    /// One write of the memory and how it ended; its size when written.
    pub fn memory_write(&self, result: &'static str, bytes: Option<usize>) {
        self.memory_writes
            .get_or_create(&ResultLabel {
                result: result.into(),
            })
            .inc();
        if let Some(b) = bytes {
            self.memory_bytes.set(b as i64);
        }
    }

    /// How many HPAs the adapter predicts.
    pub fn hpas_predicted(&self, count: usize) {
        self.hpas_predicted.set(count as i64);
    }

    /// One prediction checked against the HPA's next sync, and the misses in a row it leaves.
    pub fn hpa_prediction_checked(&self, namespace: &str, hpa: &str, hit: bool, misses: u32) {
        self.hpa_prediction_checks
            .get_or_create(&ResultLabel {
                result: if hit { "hit" } else { "miss" }.into(),
            })
            .inc();
        self.hpa_prediction_misses
            .get_or_create(&hpa_labels(namespace, hpa))
            .set(i64::from(misses));
    }

    /// An HPA no longer predicted (deleted, or no longer reading the adapter's metrics) takes
    /// its series with it.
    pub fn hpa_prediction_forget(&self, namespace: &str, hpa: &str) {
        self.hpa_prediction_misses
            .remove(&hpa_labels(namespace, hpa));
    }

    /// Targets read from the memory so far.
    pub fn memory_read(&self, targets: usize) {
        self.memory_read_targets.inc_by(targets as i64);
    }

    /// One PromQL query sent to the Prometheus source and how it ended.
    pub fn prometheus_query(&self, outcome: &str, seconds: f64) {
        self.prometheus_queries
            .get_or_create(&OutcomeLabel {
                outcome: outcome.into(),
            })
            .inc();
        self.prometheus_query_duration.observe(seconds);
        self.prometheus_up
            .set(if outcome == "success" { 1 } else { 0 });
    }

    pub fn connections_open(&self, listener: &str, open: usize) {
        self.connections
            .get_or_create(&ListenerLabel {
                listener: listener.into(),
            })
            .set(open as i64);
    }

    pub fn connection_refused(&self, listener: &str, reason: &str) {
        self.connections_refused
            .get_or_create(&ConnectionLabels {
                listener: listener.into(),
                reason: reason.into(),
            })
            .inc();
    }

    pub fn client_penalized(&self, listener: &str, strike: &str) {
        self.clients_penalized
            .get_or_create(&ConnectionLabels {
                listener: listener.into(),
                reason: strike.into(),
            })
            .inc();
    }

    pub fn clients_dropped(&self, listener: &str, dropped: usize) {
        self.clients_dropped
            .get_or_create(&ListenerLabel {
                listener: listener.into(),
            })
            .set(dropped as i64);
    }

    pub fn connection_expired(&self, listener: &str, reason: &str) {
        self.connections_expired
            .get_or_create(&ConnectionLabels {
                listener: listener.into(),
                reason: reason.into(),
            })
            .inc();
    }

    pub fn scrape_error(&self, target: &TargetId, reason: &'static str) {
        let mut reasons = self
            .scrape_error_reasons
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        self.scrape_errors
            .get_or_create(&scrape_error_labels(target, reason))
            .inc();
        let known = reasons.entry(target.clone()).or_default();
        if !known.contains(&reason) {
            known.push(reason);
        }
    }

    /// Drop the per-target series of every target `keep` refuses: a target that left the
    /// target set (a deleted pod) takes its series with it, so churn does not grow the page.
    pub fn retain_targets(&self, keep: impl Fn(&TargetId) -> bool) {
        let mut reasons = self
            .scrape_error_reasons
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        reasons.retain(|target, known| {
            if keep(target) {
                return true;
            }
            for reason in known.iter() {
                self.scrape_errors
                    .remove(&scrape_error_labels(target, reason));
            }
            false
        });
    }

    pub fn request(&self, code: u16, metric: &str, seconds: f64) {
        let known = |s: &ServedSeries| {
            let count = s.requests.iter().find(|(c, _)| *c == code)?;
            Some((count.1.clone(), s.duration.clone()?))
        };
        let (count, duration) = self.served_series(metric, known, |s| {
            let count = self
                .requests
                .get_or_create(&RequestLabels {
                    code: code.to_string().into(),
                    metric: metric.into(),
                })
                .clone();
            s.requests.push((code, count.clone()));
            let duration = s.duration.get_or_insert_with(|| {
                self.request_duration
                    .get_or_create(&MetricLabel {
                        metric: metric.into(),
                    })
                    .clone()
            });
            (count, duration.clone())
        });
        count.inc();
        duration.observe(seconds);
    }

    pub fn answer(&self, metric: &str, outcome: &str) {
        let known = |s: &ServedSeries| {
            let (_, count) = s.answers.iter().find(|(o, _)| &**o == outcome)?;
            Some(count.clone())
        };
        let count = self.served_series(metric, known, |s| {
            let count = self
                .answers
                .get_or_create(&AnswerLabels {
                    metric: metric.into(),
                    outcome: outcome.into(),
                })
                .clone();
            s.answers.push((outcome.into(), count.clone()));
            count
        });
        count.inc();
    }

    /// What `known` finds among `metric`'s handles, or what `add` puts there.
    fn served_series<T>(
        &self,
        metric: &str,
        known: impl Fn(&ServedSeries) -> Option<T>,
        add: impl FnOnce(&mut ServedSeries) -> T,
    ) -> T {
        {
            let served = self.served.read().unwrap_or_else(|e| e.into_inner());
            if let Some(found) = served.get(metric).and_then(&known) {
                return found;
            }
        }
        let mut served = self.served.write().unwrap_or_else(|e| e.into_inner());
        let series = served.entry(metric.into()).or_default();
        match known(series) {
            Some(found) => found,
            None => add(series),
        }
    }

    /// Set a gauge family (`series`, `stale_series`, `targets`), or leave it out of the
    /// exposition when `value` is `None` because it does not apply to the active source.
    pub fn set_gauge(&self, family: &'static str, gauge: &Gauge, value: Option<usize>) {
        let mut absent = self.absent.lock().unwrap_or_else(|e| e.into_inner());
        match value {
            Some(v) => {
                gauge.set(v as i64);
                absent.remove(family);
            }
            None => {
                absent.insert(family);
            }
        }
    }

    /// Replace the per-scope gauges with `scopes` (bounded by `history.maxScopes`), and bring
    /// the dropped-scope counter up to `dropped`. Scopes that share a (namespace, metric,
    /// workload) label set are merged: refusing if any refuses, since the earliest start.
    pub fn set_scopes(&self, scopes: &[ScopeGauges], tracked: usize, dropped: u64) {
        let mut merged: std::collections::BTreeMap<ScopeLabels, (bool, Option<f64>, bool)> =
            Default::default();
        for s in scopes {
            let labels = ScopeLabels {
                namespace: s.namespace.as_str().into(),
                metric: s.metric.as_str().into(),
                workload: s.workload.as_str().into(),
            };
            let m = merged.entry(labels).or_insert((false, None, false));
            m.0 |= s.refusing;
            m.1 = match (m.1, s.refusing_since_seconds) {
                (Some(a), Some(b)) => Some(a.min(b)),
                (a, b) => a.or(b),
            };
            m.2 |= s.floor_holds;
        }
        self.scope_refusing.clear();
        self.scope_refusing_since.clear();
        self.scope_floor_holds.clear();
        for (labels, (refusing, since, floor)) in merged {
            self.scope_refusing
                .get_or_create(&labels)
                .set(i64::from(refusing));
            self.scope_floor_holds
                .get_or_create(&labels)
                .set(i64::from(floor));
            if let (true, Some(since)) = (refusing, since) {
                self.scope_refusing_since.get_or_create(&labels).set(since);
            }
        }
        self.history_scopes.set(tracked as i64);
        let counted = self.history_scopes_dropped.get();
        if dropped > counted {
            self.history_scopes_dropped.inc_by(dropped - counted);
        }
    }

    /// Leave `families` out of the exposition (or put them back): series that mean nothing in
    /// the running mode, such as the Prometheus source's without a Prometheus source.
    pub fn set_absent(&self, families: &[&'static str], absent: bool) {
        let mut set = self.absent.lock().unwrap_or_else(|e| e.into_inner());
        for f in families {
            if absent {
                set.insert(f);
            } else {
                set.remove(f);
            }
        }
    }

    /// The registry in the Prometheus text format 0.0.4, for clients that do not ask for
    /// OpenMetrics (curl, `promtool check metrics`): the same samples, with a counter's HELP
    /// and TYPE naming its `_total` series as that format wants, and without OpenMetrics'
    /// `# UNIT` and `# EOF` lines.
    pub fn render_text_format(&self) -> String {
        to_text_format(&self.render())
    }

    /// The registry in the OpenMetrics text format.
    pub fn render(&self) -> String {
        let mut out = String::new();
        if prometheus_client::encoding::text::encode(&mut out, &self.registry).is_err() {
            out.clear();
        }
        let absent = self.absent.lock().unwrap_or_else(|e| e.into_inner());
        if absent.is_empty() {
            return out;
        }
        let dropped = |line: &str| {
            let rest = line
                .strip_prefix("# HELP ")
                .or_else(|| line.strip_prefix("# TYPE "))
                .unwrap_or(line);
            let name = rest.split([' ', '{']).next().unwrap_or("");
            let Some(name) = name.strip_prefix("hpa_bridge_") else {
                return false;
            };
            // A family's samples carry suffixes: `_total`, `_bucket`, `_sum`, `_count`, `_created`.
            absent.contains(name)
                || ["_total", "_bucket", "_sum", "_count", "_created"]
                    .iter()
                    .any(|sfx| name.strip_suffix(sfx).is_some_and(|f| absent.contains(f)))
        };
        out.lines()
            .filter(|l| !dropped(l))
            .flat_map(|l| [l, "\n"])
            .collect()
    }
}

/// An OpenMetrics page in the Prometheus text format 0.0.4 (see `render_text_format`).
fn to_text_format(openmetrics: &str) -> String {
    let counters: std::collections::HashSet<&str> = openmetrics
        .lines()
        .filter_map(|l| l.strip_prefix("# TYPE "))
        .filter_map(|rest| rest.strip_suffix(" counter"))
        .collect();
    let mut out = String::with_capacity(openmetrics.len() + 16 * counters.len());
    for line in openmetrics.lines() {
        if line == "# EOF" || line.starts_with("# UNIT ") {
            continue;
        }
        let meta = ["# HELP ", "# TYPE "]
            .into_iter()
            .find_map(|p| line.strip_prefix(p).map(|rest| (p, rest)));
        match meta {
            Some((prefix, rest)) => {
                let (name, tail) = rest.split_once(' ').unwrap_or((rest, ""));
                if counters.contains(name) {
                    out.push_str(&format!("{prefix}{name}_total {tail}"));
                } else {
                    out.push_str(line);
                }
            }
            None => out.push_str(line),
        }
        out.push('\n');
    }
    out
}

fn scrape_error_labels(target: &TargetId, reason: &str) -> ScrapeErrorLabels {
    ScrapeErrorLabels {
        target: target.0.as_ref().into(),
        reason: reason.into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_family_is_exposed_once_with_its_help_in_the_tables_order() {
        let out = SelfMetrics::new().render();
        let helps: Vec<&str> = out
            .lines()
            .filter_map(|l| l.strip_prefix("# HELP hpa_bridge_"))
            .collect();
        let want: Vec<String> = FAMILIES
            .iter()
            .map(|(name, help)| format!("{name} {help}."))
            .collect();
        assert_eq!(helps, want);
    }

    #[test]
    fn scrape_error_labels_carry_what_they_are_given() {
        // The target label is the target id, which for static targets is already redacted
        // (`engine::static_targets`); this pins that the counter does not re-derive it.
        let m = SelfMetrics::new();
        m.scrape_error(&TargetId("http://u:xxxxx@h/m".into()), "connect");
        assert!(m.render().contains(
            "hpa_bridge_scrape_errors_total{target=\"http://u:xxxxx@h/m\",reason=\"connect\"} 1"
        ));
    }

    #[test]
    fn prometheus_families_can_be_left_out_entirely() {
        let m = SelfMetrics::new();
        m.prometheus_query("error", 0.1);
        assert!(m.render().contains("hpa_bridge_prometheus_up 0"));
        m.set_absent(&PROMETHEUS_FAMILIES, true);
        let out = m.render();
        assert!(!out.contains("hpa_bridge_prometheus"), "{out}");
        assert!(out.contains("hpa_bridge_requests"), "{out}");
        m.set_absent(&PROMETHEUS_FAMILIES, false);
        assert!(m.render().contains("hpa_bridge_prometheus_up 0"));
    }

    /// Requests and answers are counted through kept handles: each label set still has its
    /// own series, and a handle added later does not disturb those already kept.
    #[test]
    fn kept_request_and_answer_handles_count_each_label_set_apart() {
        let m = SelfMetrics::new();
        for (code, metric) in [(200, "a"), (200, "a"), (404, "a"), (200, "b"), (200, "a")] {
            m.request(code, metric, 0.001);
        }
        for (metric, outcome) in [
            ("a", "served"),
            ("a", "Stale"),
            ("a", "served"),
            ("b", "Stale"),
        ] {
            m.answer(metric, outcome);
        }
        let out = m.render();
        for line in [
            "hpa_bridge_requests_total{code=\"200\",metric=\"a\"} 3",
            "hpa_bridge_requests_total{code=\"404\",metric=\"a\"} 1",
            "hpa_bridge_requests_total{code=\"200\",metric=\"b\"} 1",
            "hpa_bridge_request_duration_seconds_count{metric=\"a\"} 4",
            "hpa_bridge_request_duration_seconds_count{metric=\"b\"} 1",
            "hpa_bridge_answers_total{metric=\"a\",outcome=\"served\"} 2",
            "hpa_bridge_answers_total{metric=\"a\",outcome=\"Stale\"} 1",
            "hpa_bridge_answers_total{metric=\"b\",outcome=\"Stale\"} 1",
        ] {
            assert!(out.contains(line), "{line} in\n{out}");
        }
    }

    fn scope(workload: &str, refusing: bool, since: Option<f64>, floor: bool) -> ScopeGauges {
        ScopeGauges {
            namespace: "games".into(),
            metric: "hpa_target_replicas".into(),
            workload: workload.into(),
            refusing,
            refusing_since_seconds: since,
            floor_holds: floor,
        }
    }

    #[test]
    fn scope_gauges_are_replaced_merged_and_escaped() {
        let m = SelfMetrics::new();
        m.set_scopes(
            &[
                scope("lobby", true, Some(100.0), false),
                scope("lobby", false, None, true),
                scope("shop", false, None, false),
                scope("a\"b", false, None, false),
            ],
            4,
            2,
        );
        let out = m.render();
        let l = "namespace=\"games\",metric=\"hpa_target_replicas\",workload=\"lobby\"";
        assert!(
            out.contains(&format!("hpa_bridge_scope_refusing{{{l}}} 1")),
            "{out}"
        );
        assert!(out.contains(&format!(
            "hpa_bridge_scope_floor_above_recommendation{{{l}}} 1"
        )));
        assert!(out.contains(&format!(
            "hpa_bridge_scope_refusing_since_timestamp_seconds{{{l}}} 100"
        )));
        assert!(out.contains("workload=\"a\\\"b\""), "{out}");
        assert!(out.contains("hpa_bridge_history_scopes_dropped_total 2"));
        // The next refresh replaces the set: a dropped scope's series go.
        m.set_scopes(&[scope("shop", false, None, false)], 1, 3);
        let out = m.render();
        assert!(!out.contains("workload=\"lobby\""), "{out}");
        assert!(
            !out.contains("scope_refusing_since_timestamp_seconds{"),
            "{out}"
        );
        assert!(out.contains("hpa_bridge_history_scopes_dropped_total 3"));
        assert!(out.contains("hpa_bridge_history_scopes 1"));
    }
}
