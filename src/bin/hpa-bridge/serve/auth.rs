//! `serve`'s aggregated-API security: its flags and the gatekeeper built from them.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, Result};
use clap::Args;
use hpa_bridge_server::auth;

use crate::parse_duration;

/// Aggregated-API security (docs/hpa-behaviour.md §3.2–3.3). The flag names are k8s.io/apiserver's.
#[derive(Args, Debug)]
pub(crate) struct AuthArgs {
    /// CA bundle (PEM) that verifies the front proxy's client certificate (the aggregator's
    /// --proxy-client-cert-file). Replaces every requestheader-* key of the
    /// kube-system/extension-apiserver-authentication ConfigMap. Re-read periodically.
    #[arg(long, value_name = "FILE")]
    pub(crate) requestheader_client_ca_file: Option<PathBuf>,
    /// Common names allowed on the front proxy's certificate (comma list). Empty allows any CN
    /// signed by --requestheader-client-ca-file.
    #[arg(long, value_name = "CN", value_delimiter = ',')]
    pub(crate) requestheader_allowed_names: Vec<String>,
    /// Headers carrying the user name, first non-empty wins.
    #[arg(
        long,
        value_name = "HEADER",
        value_delimiter = ',',
        default_value = "X-Remote-User"
    )]
    pub(crate) requestheader_username_headers: Vec<String>,
    /// Headers carrying groups; every value counts.
    #[arg(
        long,
        value_name = "HEADER",
        value_delimiter = ',',
        default_value = "X-Remote-Group"
    )]
    pub(crate) requestheader_group_headers: Vec<String>,
    /// Header prefixes carrying extra attributes (key lower-cased and %-decoded).
    #[arg(
        long,
        value_name = "PREFIX",
        value_delimiter = ',',
        default_value = "X-Remote-Extra-"
    )]
    pub(crate) requestheader_extra_headers_prefix: Vec<String>,
    /// CA bundle (PEM) that verifies client certificates: user = CN, groups = O. Replaces the
    /// ConfigMap's client-ca-file. Re-read periodically.
    #[arg(long, value_name = "FILE")]
    pub(crate) client_ca_file: Option<PathBuf>,
    /// Kubeconfig for TokenReview and for reading the extension-apiserver-authentication ConfigMap.
    /// Without it, the in-cluster configuration is used when running in a pod.
    #[arg(long, value_name = "FILE")]
    pub(crate) authentication_kubeconfig: Option<PathBuf>,
    /// Kubeconfig for SubjectAccessReview. Defaults to --authentication-kubeconfig, then in-cluster.
    #[arg(long, value_name = "FILE")]
    pub(crate) authorization_kubeconfig: Option<PathBuf>,
    /// Do not read the extension-apiserver-authentication ConfigMap; trust only the CA flags.
    #[arg(long)]
    pub(crate) authentication_skip_lookup: bool,
    /// Start even if the ConfigMap cannot be read (it is retried on every reload).
    #[arg(long)]
    pub(crate) authentication_tolerate_lookup_failure: bool,
    /// Groups allowed without a SubjectAccessReview (comma list).
    #[arg(
        long,
        value_name = "GROUP",
        value_delimiter = ',',
        default_value = "system:masters"
    )]
    pub(crate) authorization_always_allow_groups: Vec<String>,
    /// How long TokenReview answers are cached.
    #[arg(long, value_name = "TTL", default_value = "10s", value_parser = parse_duration)]
    pub(crate) authentication_token_webhook_cache_ttl: Duration,
    /// How long allowing SubjectAccessReview answers are cached.
    #[arg(long, value_name = "TTL", default_value = "10s", value_parser = parse_duration)]
    pub(crate) authorization_webhook_cache_authorized_ttl: Duration,
    /// How long denying SubjectAccessReview answers are cached (shorter: a new RoleBinding
    /// should take effect quickly).
    #[arg(long, value_name = "TTL", default_value = "5s", value_parser = parse_duration)]
    pub(crate) authorization_webhook_cache_unauthorized_ttl: Duration,
    /// How often CA files and the ConfigMap are re-read.
    #[arg(long, default_value = "60s", value_parser = parse_duration, hide = true)]
    pub(crate) authentication_reload_interval: Duration,
    /// How often the serving certificate files are checked for changes.
    #[arg(long, default_value = "10s", value_parser = parse_duration, hide = true)]
    pub(crate) tls_reload_interval: Duration,
}

impl AuthArgs {
    pub(crate) fn running_in_cluster() -> bool {
        std::env::var_os("KUBERNETES_SERVICE_HOST").is_some()
    }

    /// Is any authentication configured? Without it the server stays loopback-only.
    pub(crate) fn configured(&self) -> bool {
        self.requestheader_client_ca_file.is_some()
            || self.client_ca_file.is_some()
            || self.authentication_kubeconfig.is_some()
            || self.authorization_kubeconfig.is_some()
            || Self::running_in_cluster()
    }
}

/// A client configuration from an explicit kubeconfig file; errors name the flag.
pub(crate) async fn kubeconfig_file(path: &std::path::Path, what: &str) -> Result<kube::Config> {
    let kc = kube::config::Kubeconfig::read_from(path)
        .with_context(|| format!("{what}: reading {}", path.display()))?;
    kube::Config::from_custom_kubeconfig(kc, &kube::config::KubeConfigOptions::default())
        .await
        .with_context(|| format!("{what}: {}", path.display()))
}

async fn kube_client(kubeconfig: Option<&PathBuf>, what: &str) -> Result<Option<kube::Client>> {
    let config = match kubeconfig {
        Some(path) => kubeconfig_file(path, what).await?,
        None if AuthArgs::running_in_cluster() => kube::Config::incluster()
            .with_context(|| format!("{what}: in-cluster configuration"))?,
        None => return Ok(None),
    };
    Ok(Some(
        kube::Client::try_from(config).with_context(|| format!("{what}: building the client"))?,
    ))
}

/// The gatekeeper and the TLS client-certificate verifier, if authentication is configured.
pub(crate) async fn build_auth(
    a: &AuthArgs,
) -> Result<
    Option<(
        Arc<auth::AuthGate>,
        Arc<dyn rustls::server::danger::ClientCertVerifier>,
    )>,
> {
    if !a.configured() {
        return Ok(None);
    }
    const REVIEW_TIMEOUT: Duration = Duration::from_secs(10);
    let authn_client = kube_client(
        a.authentication_kubeconfig.as_ref(),
        "--authentication-kubeconfig",
    )
    .await?;
    let authz_client = match &a.authorization_kubeconfig {
        Some(p) => kube_client(Some(p), "--authorization-kubeconfig").await?,
        None => authn_client.clone(),
    };
    let settings = auth::TrustSettings {
        requestheader_client_ca_file: a.requestheader_client_ca_file.clone(),
        requestheader: auth::requestheader::RequestHeaderConfig {
            allowed_names: a.requestheader_allowed_names.clone(),
            username_headers: a.requestheader_username_headers.clone(),
            group_headers: a.requestheader_group_headers.clone(),
            extra_headers_prefixes: a.requestheader_extra_headers_prefix.clone(),
        },
        client_ca_file: a.client_ca_file.clone(),
        lookup: if a.authentication_skip_lookup {
            None
        } else {
            authn_client.clone()
        },
    };
    let trust = auth::TrustStore::load(settings, a.authentication_tolerate_lookup_failure)
        .await
        .context("loading client certificate trust")?;
    trust.spawn_reloader(a.authentication_reload_interval);
    {
        let t = trust.current();
        let (requestheader_ca, client_ca) = t.origins();
        tracing::info!(
            requestheader_ca,
            client_ca,
            token_review = authn_client.is_some(),
            subject_access_review = authz_client.is_some(),
            "authentication configured"
        );
    }
    let verifier = trust.client_verifier();
    let gate = auth::AuthGate {
        authenticator: auth::Authenticator {
            trust,
            tokens: authn_client.map(|c| {
                auth::TokenReviewer::new(
                    c,
                    a.authentication_token_webhook_cache_ttl,
                    REVIEW_TIMEOUT,
                )
            }),
        },
        authorizer: auth::Authorizer::new(
            authz_client,
            a.authorization_always_allow_groups.clone(),
            a.authorization_webhook_cache_authorized_ttl,
            a.authorization_webhook_cache_unauthorized_ttl,
            REVIEW_TIMEOUT,
        ),
    };
    Ok(Some((Arc::new(gate), verifier)))
}
