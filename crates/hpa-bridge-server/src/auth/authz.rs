//! Authorization by `SubjectAccessReview` (authorization.k8s.io/v1), with allow and deny caches,
//! and a bypass for always-allowed groups such as `system:masters` (docs/hpa-behaviour.md §3.3).

use std::fmt;
use std::time::Duration;

use http::Method;
use k8s_openapi::api::authorization::v1::{
    NonResourceAttributes, ResourceAttributes, SubjectAccessReview, SubjectAccessReviewSpec,
};
use kube::api::PostParams;
use tokio::time::Instant;

use super::{AuthUser, TtlCache};
use crate::api::custom_metrics::ResourceInfo;
use crate::api::{Route, GROUP, VERSION};

/// What a request does, in the terms of a SubjectAccessReview.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Attributes {
    /// A metric read: `GET /apis/external.metrics.k8s.io/v1beta1/namespaces/{ns}/{metric}`.
    Resource {
        verb: String,
        namespace: String,
        resource: String,
    },
    /// Discovery and unknown paths. k8s's request-info resolver treats `/apis`,
    /// `/apis/<group>` and `/apis/<group>/<version>` as non-resource URLs, so their reviews carry
    /// `nonResourceAttributes {path, verb}` rather than resource attributes.
    NonResource { verb: String, path: String },
    /// A custom.metrics.k8s.io resource request, with the attributes kube-apiserver's
    /// request-info parser derives from the path: for an Object metric, resource
    /// `statefulsets.apps`, name the object, subresource the metric, verb `get`
    /// (docs/hpa-behaviour.md §6.6).
    Custom(ResourceInfo),
}

impl Attributes {
    pub fn for_request(method: &Method, path: &str, route: &Route) -> Self {
        match route {
            Route::ExternalMetric(namespace, metric) => Attributes::Resource {
                verb: resource_verb(method).to_string(),
                namespace: namespace.clone(),
                // client-go lower-cases the metric name (docs/hpa-behaviour.md §1.2); so do we.
                resource: metric.to_ascii_lowercase(),
            },
            Route::CustomMetrics(custom) => match custom.resource_info(method) {
                Some(info) => Attributes::Custom(info),
                None => Attributes::NonResource {
                    verb: method.as_str().to_ascii_lowercase(),
                    path: path.to_string(),
                },
            },
            _ => Attributes::NonResource {
                verb: method.as_str().to_ascii_lowercase(),
                path: path.to_string(),
            },
        }
    }

    pub fn spec(&self, user: &AuthUser) -> SubjectAccessReviewSpec {
        let mut spec = SubjectAccessReviewSpec {
            user: Some(user.name.clone()),
            groups: Some(user.groups.clone()),
            extra: (!user.extra.is_empty()).then(|| user.extra.clone()),
            uid: (!user.uid.is_empty()).then(|| user.uid.clone()),
            ..Default::default()
        };
        match self {
            Attributes::Resource {
                verb,
                namespace,
                resource,
            } => {
                spec.resource_attributes = Some(ResourceAttributes {
                    verb: Some(verb.clone()),
                    group: Some(GROUP.to_string()),
                    version: Some(VERSION.to_string()),
                    resource: Some(resource.clone()),
                    namespace: Some(namespace.clone()),
                    ..Default::default()
                })
            }
            Attributes::NonResource { verb, path } => {
                spec.non_resource_attributes = Some(NonResourceAttributes {
                    verb: Some(verb.clone()),
                    path: Some(path.clone()),
                })
            }
            Attributes::Custom(info) => {
                // Empty attributes are left out, as kube-apiserver's webhook authorizer does.
                let set = |s: &String| (!s.is_empty()).then(|| s.clone());
                spec.resource_attributes = Some(ResourceAttributes {
                    verb: set(&info.verb),
                    group: set(&info.group),
                    version: set(&info.version),
                    resource: set(&info.resource),
                    subresource: set(&info.subresource),
                    name: set(&info.name),
                    namespace: set(&info.namespace),
                    ..Default::default()
                })
            }
        }
        spec
    }

    /// The message kube-apiserver writes for a denial, so `kubectl` users see the familiar text.
    pub fn forbidden_message(&self, user: &str, reason: &str) -> String {
        let base = match self {
            Attributes::Resource {
                verb,
                namespace,
                resource,
            } => format!(
                "{resource}.{GROUP} is forbidden: User \"{user}\" cannot {verb} resource \"{resource}\" \
                 in API group \"{GROUP}\" in the namespace \"{namespace}\""
            ),
            Attributes::NonResource { verb, path } => {
                format!("forbidden: User \"{user}\" cannot {verb} path \"{path}\"")
            }
            Attributes::Custom(i) => {
                let qualified = format!("{}.{}", i.resource, i.group);
                let subject = if i.name.is_empty() {
                    qualified
                } else {
                    format!("{qualified} {:?}", i.name)
                };
                let resource = if i.subresource.is_empty() {
                    i.resource.clone()
                } else {
                    format!("{}/{}", i.resource, i.subresource)
                };
                let scope = if i.namespace.is_empty() {
                    "at the cluster scope".to_string()
                } else {
                    format!("in the namespace \"{}\"", i.namespace)
                };
                format!(
                    "{subject} is forbidden: User \"{user}\" cannot {} resource \"{resource}\" \
                     in API group \"{}\" {scope}",
                    i.verb, i.group
                )
            }
        };
        if reason.is_empty() {
            base
        } else {
            format!("{base}: {reason}")
        }
    }
}

impl fmt::Display for Attributes {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Attributes::Resource {
                verb,
                namespace,
                resource,
            } => write!(f, "{verb} {resource} in {namespace}"),
            Attributes::NonResource { verb, path } => write!(f, "{verb} {path}"),
            Attributes::Custom(i) => write!(
                f,
                "{} {}/{} {} in {}",
                i.verb, i.resource, i.subresource, i.name, i.namespace
            ),
        }
    }
}

/// k8s's verb for a method on a collection; a metric path names a list of values.
fn resource_verb(method: &Method) -> &'static str {
    match *method {
        Method::GET | Method::HEAD => "list",
        Method::POST => "create",
        Method::PUT => "update",
        Method::PATCH => "patch",
        Method::DELETE => "deletecollection",
        _ => "unknown",
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Decision {
    Allow,
    /// The reviewer's reason (may be empty).
    Deny(String),
}

#[derive(Debug, thiserror::Error, Clone, PartialEq, Eq)]
pub enum AuthzError {
    #[error("SubjectAccessReview failed: {0}")]
    Review(String),
    #[error("SubjectAccessReview did not answer within {0:?}")]
    Timeout(Duration),
}

pub struct Authorizer {
    client: Option<kube::Client>,
    always_allow_groups: Vec<String>,
    allow_ttl: Duration,
    deny_ttl: Duration,
    timeout: Duration,
    cache: TtlCache<String, Decision>,
}

impl Authorizer {
    /// Without a client, only the always-allowed groups get in.
    pub fn new(
        client: Option<kube::Client>,
        always_allow_groups: Vec<String>,
        allow_ttl: Duration,
        deny_ttl: Duration,
        timeout: Duration,
    ) -> Self {
        Authorizer {
            client,
            always_allow_groups,
            allow_ttl,
            deny_ttl,
            timeout,
            cache: TtlCache::new(4096),
        }
    }

    pub async fn authorize(
        &self,
        user: &AuthUser,
        attrs: &Attributes,
    ) -> Result<Decision, AuthzError> {
        if user
            .groups
            .iter()
            .any(|g| self.always_allow_groups.contains(g))
        {
            return Ok(Decision::Allow);
        }
        let Some(client) = &self.client else {
            return Ok(Decision::Deny(
                "no --authorization-kubeconfig is configured, so only members of \
                 --authorization-always-allow-groups are allowed"
                    .into(),
            ));
        };
        let spec = attrs.spec(user);
        // The spec is the whole question, so it is the cache key.
        // Never share a decision under a degenerate key: without one, skip the cache.
        let key = serde_json::to_string(&spec).ok();
        if let Some(d) = key.as_ref().and_then(|k| self.cache.get(k, Instant::now())) {
            return Ok(d);
        }
        let review = SubjectAccessReview {
            spec,
            ..Default::default()
        };
        let api: kube::Api<SubjectAccessReview> = kube::Api::all(client.clone());
        let answer =
            tokio::time::timeout(self.timeout, api.create(&PostParams::default(), &review))
                .await
                .map_err(|_| AuthzError::Timeout(self.timeout))?
                .map_err(|e| AuthzError::Review(e.to_string()))?;
        let status = answer.status.unwrap_or_default();
        let (decision, ttl) = if status.allowed && status.denied != Some(true) {
            (Decision::Allow, self.allow_ttl)
        } else {
            let reason = [status.reason, status.evaluation_error]
                .into_iter()
                .flatten()
                .filter(|s| !s.is_empty())
                .collect::<Vec<_>>()
                .join("; ");
            (Decision::Deny(reason), self.deny_ttl)
        };
        if let Some(key) = key {
            self.cache
                .insert(key, decision.clone(), Instant::now(), ttl);
        }
        Ok(decision)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn metric_route() -> Route {
        Route::ExternalMetric("default".into(), "HPA_Expect_Replicas".into())
    }

    #[test]
    fn metric_read_is_list_on_the_lowercased_metric() {
        let a = Attributes::for_request(&Method::GET, "/ignored", &metric_route());
        let user = AuthUser {
            name: "alice".into(),
            uid: "u".into(),
            groups: vec!["g".into()],
            ..Default::default()
        };
        let spec = serde_json::to_value(a.spec(&user)).unwrap();
        assert_eq!(
            spec,
            serde_json::json!({
                "user": "alice", "uid": "u", "groups": ["g"],
                "resourceAttributes": {
                    "verb": "list", "group": "external.metrics.k8s.io", "version": "v1beta1",
                    "resource": "hpa_expect_replicas", "namespace": "default"
                }
            })
        );
        assert_eq!(
            a.forbidden_message("alice", ""),
            "hpa_expect_replicas.external.metrics.k8s.io is forbidden: User \"alice\" cannot list resource \
             \"hpa_expect_replicas\" in API group \"external.metrics.k8s.io\" in the namespace \"default\""
        );
    }

    #[test]
    fn an_object_metric_read_is_get_on_the_named_workload_with_the_metric_as_subresource() {
        let path = "/apis/custom.metrics.k8s.io/v1beta2/namespaces/games/statefulsets.apps/lobby/hpa_target_replicas";
        let a = Attributes::for_request(&Method::GET, path, &crate::api::route(path));
        let spec = serde_json::to_value(a.spec(&AuthUser {
            name: "hpa".into(),
            ..Default::default()
        }))
        .unwrap();
        assert_eq!(
            spec["resourceAttributes"],
            serde_json::json!({
                "verb": "get", "group": "custom.metrics.k8s.io", "version": "v1beta2",
                "resource": "statefulsets.apps", "name": "lobby",
                "subresource": "hpa_target_replicas", "namespace": "games"
            })
        );
        assert_eq!(
            a.forbidden_message("hpa", ""),
            "statefulsets.apps.custom.metrics.k8s.io \"lobby\" is forbidden: User \"hpa\" cannot get \
             resource \"statefulsets.apps/hpa_target_replicas\" in API group \"custom.metrics.k8s.io\" \
             in the namespace \"games\""
        );
        // Discovery of the group version is a non-resource URL, as for external metrics.
        let path = "/apis/custom.metrics.k8s.io/v1beta1";
        let a = Attributes::for_request(&Method::GET, path, &crate::api::route(path));
        assert!(matches!(a, Attributes::NonResource { .. }));
    }

    #[test]
    fn discovery_is_non_resource_get() {
        let a = Attributes::for_request(&Method::GET, "/apis", &Route::ApiGroupList);
        let spec = serde_json::to_value(a.spec(&AuthUser::default())).unwrap();
        assert_eq!(
            spec["nonResourceAttributes"],
            serde_json::json!({"path": "/apis", "verb": "get"})
        );
        assert!(spec.get("resourceAttributes").is_none());
        assert_eq!(
            a.forbidden_message("bob", "no rule"),
            "forbidden: User \"bob\" cannot get path \"/apis\": no rule"
        );
    }

    #[tokio::test]
    async fn always_allowed_group_needs_no_review_and_others_are_denied_without_a_reviewer() {
        let z = Authorizer::new(
            None,
            vec!["system:masters".into()],
            Duration::from_secs(10),
            Duration::from_secs(5),
            Duration::from_secs(5),
        );
        let attrs = Attributes::for_request(&Method::GET, "/x", &metric_route());
        let admin = AuthUser {
            name: "admin".into(),
            groups: vec!["system:masters".into()],
            ..Default::default()
        };
        assert_eq!(z.authorize(&admin, &attrs).await, Ok(Decision::Allow));
        let other = AuthUser {
            name: "x".into(),
            ..Default::default()
        };
        assert!(matches!(
            z.authorize(&other, &attrs).await,
            Ok(Decision::Deny(_))
        ));
    }
}
