//! The I/O of the predictions: a watch of the autoscaling/v2 HPAs in the served namespaces,
//! and for each HPA that reads hpa-bridge's metrics (or is shadowed), just after each of its
//! syncs: the scale subresource of its target, the answers the adapter would give it now
//! (evaluated, not served), the adapter's history of its answers, the model's explanation, and
//! the check of the previous prediction against what the HPA then set.
//!
//! Per HPA and sync this costs one GET of the scale subresource; the HPAs come from one watch.
//! The model runs off the async workers (`spawn_blocking`), so a crowd of HPAs never holds up
//! an answer to one.

use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::autoscaling::v2::HorizontalPodAutoscaler;
use kube::api::ApiResource;
use kube::runtime::reflector::{self, Store};
use kube::runtime::{watcher, WatchStreamExt};
use kube::{Api, Client};
use serde_json::Value;

use super::board::{HpaPrediction, Predictions};
use super::check::Pending;
use super::shadow::{scale_target, shadow_metric, shadowed};
use crate::explain::explanation::scope_of;
use crate::explain::{explain, AnswerHistory, Observation, ServedAnswer};
use hpa_bridge_engine::engine::history::Filter;
use hpa_bridge_engine::engine::{Adapter, MetricQuery, ObjectKind, ObjectRef};
use hpa_bridge_hpa_model::{HpaSpec, MetricSpec, NEWEST_KUBE_MINOR};
use hpa_bridge_rules::clock::Millis;
use hpa_bridge_rules::selector::LabelSelector;

/// What the predictions of one `serve` read and where they go.
pub struct HpaWatch {
    pub client: Client,
    /// The namespaces served; empty for all.
    pub namespaces: Vec<String>,
    pub adapter: Arc<Adapter>,
    pub predictions: Arc<Predictions>,
    /// The longest an HPA goes without being explained again (its sync period, 15 s by
    /// default: an HPA's next sync is predicted just after each sync).
    pub interval: Duration,
}

/// What a round over the HPAs reads for all of them.
struct Pass {
    now_ms: Millis,
    kube_minor: u32,
    served: BTreeSet<String>,
    hpas: Vec<Arc<HorizontalPodAutoscaler>>,
    histories: HashMap<String, Vec<AnswerHistory>>,
}

impl HpaWatch {
    pub fn spawn(self) -> tokio::task::JoinHandle<()> {
        tokio::spawn(self.run())
    }

    async fn run(self) {
        let stores = self.mirrors();
        for s in &stores {
            // Fails only when the writer is dropped: the runtime is shutting down.
            let _ = s.wait_until_ready().await;
        }
        let kube_minor = self
            .client
            .apiserver_version()
            .await
            .ok()
            .and_then(|v| v.minor.trim_end_matches('+').parse().ok())
            .unwrap_or(NEWEST_KUBE_MINOR);
        let mut resources: HashMap<(String, String), ApiResource> = HashMap::new();
        tracing::info!(namespaces = ?self.namespaces, kube_minor, "predicting the HPAs that read hpa-bridge's metrics");
        loop {
            let mut pass = Pass {
                now_ms: self.adapter.now_ms(),
                kube_minor,
                served: self
                    .adapter
                    .served_metric_names()
                    .iter()
                    .map(|m| m.to_ascii_lowercase())
                    .collect(),
                hpas: stores.iter().flat_map(|s| s.state()).collect(),
                histories: HashMap::new(),
            };
            let chosen: Vec<Arc<HorizontalPodAutoscaler>> = pass
                .hpas
                .iter()
                .filter(|h| predicted(h, &pass.served))
                .cloned()
                .collect();
            let keys: BTreeSet<(String, String)> = chosen.iter().map(|h| key(h)).collect();
            let metrics = self.adapter.self_metrics();
            for (ns, name) in self
                .predictions
                .retain(|ns, name| keys.contains(&(ns.into(), name.into())))
            {
                metrics.hpa_prediction_forget(&ns, &name);
            }
            metrics.hpas_predicted(chosen.len());
            for hpa in &chosen {
                let (ns, name) = key(hpa);
                if !self.predictions.due(&ns, &name, pass.now_ms) {
                    continue;
                }
                let entry = self
                    .predictions
                    .get(&ns, &name)
                    .unwrap_or_else(|| HpaPrediction::new(&ns, &name));
                let entry = self.predict(hpa, entry, &mut pass, &mut resources).await;
                self.predictions.put(entry);
            }
            let now = self.adapter.now_ms();
            let next = self
                .predictions
                .next_run_ms()
                .unwrap_or(now + self.interval.as_millis() as Millis);
            let wait = (next - now).clamp(200, self.interval.as_millis().max(200) as Millis);
            tokio::time::sleep(Duration::from_millis(wait as u64)).await;
        }
    }

    /// A reflector of the HPAs per served namespace (one for all when none is named).
    fn mirrors(&self) -> Vec<Store<HorizontalPodAutoscaler>> {
        let namespaces: Vec<Option<&str>> = if self.namespaces.is_empty() {
            vec![None]
        } else {
            self.namespaces.iter().map(|n| Some(n.as_str())).collect()
        };
        namespaces
            .into_iter()
            .map(|ns| {
                let api: Api<HorizontalPodAutoscaler> = match ns {
                    Some(ns) => Api::namespaced(self.client.clone(), ns),
                    None => Api::all(self.client.clone()),
                };
                let (reader, writer) = reflector::store();
                let stream = reflector::reflector(
                    writer,
                    watcher(api, watcher::Config::default())
                        .modify(|h| h.metadata.managed_fields = None)
                        .default_backoff(),
                );
                let ns = ns.unwrap_or("*").to_string();
                tokio::spawn(async move {
                    let mut stream = std::pin::pin!(stream);
                    let mut failing = false;
                    while let Some(event) = stream.next().await {
                        match event {
                            Ok(_) if failing => {
                                tracing::info!(namespace = %ns, "HPA watch recovered");
                                failing = false;
                            }
                            Ok(_) => {}
                            Err(e) if !failing => {
                                tracing::warn!(namespace = %ns, error = %e, "HPA watch failed; retrying with backoff");
                                failing = true;
                            }
                            Err(_) => {}
                        }
                    }
                });
                reader
            })
            .collect()
    }

    /// Check `entry`'s pending prediction if its sync has settled, then explain the next sync.
    async fn predict(
        &self,
        hpa: &HorizontalPodAutoscaler,
        mut entry: HpaPrediction,
        pass: &mut Pass,
        resources: &mut HashMap<(String, String), ApiResource>,
    ) -> HpaPrediction {
        let (ns, name) = key(hpa);
        let now = self.adapter.now_ms();
        let interval = self.interval.as_millis() as Millis;
        if let Some(p) = entry.pending.filter(|p| p.ripe(now)) {
            if let Some(actual) = hpa.status.as_ref().map(|s| s.desired_replicas) {
                let hit = entry.check.record(p, actual, now);
                self.adapter.self_metrics().hpa_prediction_checked(
                    &ns,
                    &name,
                    hit,
                    entry.check.misses_in_a_row,
                );
                if !hit {
                    tracing::info!(namespace = %ns, hpa = %name, predicted = p.desired, actual, misses_in_a_row = entry.check.misses_in_a_row, "the HPA did not set the desired count predicted for it");
                }
            }
            entry.pending = None;
        }
        let hpa_json = serde_json::to_value(hpa).unwrap_or(Value::Null);
        let spec: Option<HpaSpec> = serde_json::from_value(hpa_json["spec"].clone()).ok();
        let scale = match scale_target(&hpa_json) {
            Some((api_version, kind, target)) => {
                let resource = match resources.get(&(api_version.into(), kind.into())) {
                    Some(r) => Ok(r.clone()),
                    None => crate::explain::read::resource_of(&self.client, api_version, kind)
                        .await
                        .inspect(|r| {
                            resources.insert((api_version.into(), kind.into()), r.clone());
                        }),
                };
                match resource {
                    Ok(r) => {
                        crate::explain::read::scale_of(&self.client, &ns, &r, kind, target).await
                    }
                    Err(e) => Err(e),
                }
            }
            None => Err("the HPA has no scaleTargetRef".into()),
        };
        let mut served = Vec::new();
        for m in spec.iter().flat_map(|s| &s.metrics) {
            if let Some(answer) = self.served_answer(&ns, m, &pass.served).await {
                served.push(answer);
            }
        }
        if !pass.histories.contains_key(&ns) {
            let filter = Filter {
                namespace: Some(ns.clone()),
                metric: None,
            };
            let doc =
                serde_json::to_value(self.adapter.explainer().history(&filter)).unwrap_or_default();
            let h = AnswerHistory::from_history_document(&doc);
            pass.histories.insert(ns.clone(), h);
        }
        // Only this HPA's scopes, as explain's replay finds them: a copy of the namespace's
        // whole history per HPA would grow with the square of the HPAs in it.
        let scopes: Vec<(&str, String)> = spec
            .iter()
            .flat_map(|s| &s.metrics)
            .filter_map(|m| Some((m.metric_name()?, scope_of(m)?.1)))
            .collect();
        let history: Vec<AnswerHistory> = pass.histories[&ns]
            .iter()
            .filter(|h| {
                scopes.iter().any(|(metric, scope)| {
                    h.metric.eq_ignore_ascii_case(metric)
                        && (h.scope == *scope || h.scope.starts_with(&format!("{scope} ")))
                })
            })
            .cloned()
            .collect();
        let target = hpa.spec.as_ref().map(|s| &s.scale_target_ref);
        let other_hpas_on_target = pass
            .hpas
            .iter()
            .filter(|h| key(h) != (ns.clone(), name.clone()) && key(h).0 == ns)
            .filter(|h| {
                h.spec
                    .as_ref()
                    .map(|s| &s.scale_target_ref)
                    .is_some_and(|r| target.is_some_and(|t| t.kind == r.kind && t.name == r.name))
            })
            .map(|h| key(h).1)
            .collect();
        let observation = Observation {
            hpa: hpa_json,
            scale,
            pods: Err("not counted by the adapter's predictions".into()),
            served: Ok(served),
            history: Ok(history),
            other_hpas_on_target,
            foreign_external_owner: None,
            kube_minor: pass.kube_minor,
            now_ms: now,
        };
        let shadow = match shadow_metric(&observation.hpa) {
            Some(metric) => Some((
                metric.to_string(),
                self.shadow_answer(&ns, &observation.hpa, metric, &pass.served)
                    .await,
            )),
            None => None,
        };
        let explained = tokio::task::spawn_blocking(move || {
            let real = explain(&observation).map_err(|e| e.to_string());
            let shadow = shadow.map(|(metric, answer)| {
                let would = answer.and_then(|a| {
                    let obs = shadowed(&observation, &metric, a)
                        .ok_or_else(|| "the HPA has no scaleTargetRef".to_string())?;
                    explain(&obs).map_err(|e| e.to_string())
                });
                (metric, would)
            });
            (real, shadow)
        })
        .await;
        let (real, shadow) = explained.unwrap_or_else(|e| (Err(format!("explaining: {e}")), None));
        entry.next_run_ms = now + interval;
        if let Ok(e) = &real {
            let pending = Pending {
                desired: e.next.desired_replicas,
                due_ms: e.next.at_ms,
                period_ms: e.next.period_ms,
            };
            entry.pending = Some(pending);
            entry.next_run_ms = pending.ripe_at().clamp(now + 200, now + interval);
        }
        entry.explanation = real;
        entry.shadow = shadow;
        entry
    }

    /// The answer the HPA's metric `m` would get from the adapter now, when it serves `m`.
    async fn served_answer(
        &self,
        namespace: &str,
        m: &MetricSpec,
        served: &BTreeSet<String>,
    ) -> Option<ServedAnswer> {
        let name = m.metric_name()?;
        if !served.contains(&name.to_ascii_lowercase()) {
            return None;
        }
        let (object, scope) = scope_of(m)?;
        let query = if object {
            let o = m.object.as_ref()?;
            let kind = object_kind(&o.described_object.kind)?;
            let object = ObjectRef {
                kind,
                namespace: namespace.into(),
                name: o.described_object.name.clone(),
            };
            MetricQuery::object(name, object, LabelSelector::parse("").ok()?)
        } else {
            MetricQuery::external(name, namespace, LabelSelector::parse(&scope).ok()?)
        };
        let answer = self.adapter.explainer().preview(&query).await.ok()?;
        Some(if object {
            ServedAnswer::from_answer(namespace, "", Some(scope), &answer)
        } else {
            ServedAnswer::from_answer(namespace, &scope, None, &answer)
        })
    }

    /// The answer the shadowed HPA's scale target would get for `metric` as an Object metric.
    async fn shadow_answer(
        &self,
        namespace: &str,
        hpa: &Value,
        metric: &str,
        served: &BTreeSet<String>,
    ) -> Result<ServedAnswer, String> {
        if !served.contains(&metric.to_ascii_lowercase()) {
            return Err(format!(
                "{metric} is not a metric this adapter serves ({})",
                served.iter().cloned().collect::<Vec<_>>().join(", ")
            ));
        }
        let (_, kind, target) =
            scale_target(hpa).ok_or_else(|| "the HPA has no scaleTargetRef".to_string())?;
        let object_kind = object_kind(kind).ok_or_else(|| {
            format!(
                "shadow mode reads an Object metric of a StatefulSet or Deployment, not a {kind}"
            )
        })?;
        let query = MetricQuery::object(
            metric,
            ObjectRef {
                kind: object_kind,
                namespace: namespace.into(),
                name: target.into(),
            },
            LabelSelector::parse("").map_err(|e| e.to_string())?,
        );
        let answer = self
            .adapter
            .explainer()
            .preview(&query)
            .await
            .map_err(|e| e.to_string())?;
        Ok(ServedAnswer::from_answer(
            namespace,
            "",
            Some(format!("{kind}/{target}")),
            &answer,
        ))
    }
}

/// Whether the adapter predicts `hpa`: it reads an External or Object metric the adapter
/// serves, or it is annotated for shadow mode.
fn predicted(hpa: &HorizontalPodAutoscaler, served: &BTreeSet<String>) -> bool {
    let shadowed = hpa
        .metadata
        .annotations
        .as_ref()
        .is_some_and(|a| a.contains_key(super::shadow::SHADOW_ANNOTATION));
    let reads = hpa
        .spec
        .as_ref()
        .and_then(|s| s.metrics.as_ref())
        .is_some_and(|metrics| {
            metrics.iter().any(|m| {
                let name = match m.type_.as_str() {
                    "External" => m.external.as_ref().map(|e| &e.metric.name),
                    "Object" => m.object.as_ref().map(|o| &o.metric.name),
                    _ => None,
                };
                name.is_some_and(|n| served.contains(&n.to_ascii_lowercase()))
            })
        });
    shadowed || reads
}

fn key(hpa: &HorizontalPodAutoscaler) -> (String, String) {
    (
        hpa.metadata.namespace.clone().unwrap_or_default(),
        hpa.metadata.name.clone().unwrap_or_default(),
    )
}

fn object_kind(kind: &str) -> Option<ObjectKind> {
    ObjectKind::ALL.into_iter().find(|k| k.kind() == kind)
}
