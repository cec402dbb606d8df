//! Who may present client certificates: the requestheader (front-proxy) CA with its header names,
//! and the client CA. They come from flags (files) or from the ConfigMap
//! `kube-system/extension-apiserver-authentication` and are re-read periodically, because the
//! cluster rotates them (docs/hpa-behaviour.md §3.2).

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::{Arc, RwLock};
use std::time::Duration;

use k8s_openapi::api::core::v1::ConfigMap;
use rustls::pki_types::{CertificateDer, UnixTime};
use rustls::server::danger::{ClientCertVerified, ClientCertVerifier};
use rustls::server::WebPkiClientVerifier;
use rustls::{DigitallySignedStruct, DistinguishedName, RootCertStore, SignatureScheme};

use super::requestheader::RequestHeaderConfig;
use hpa_bridge_sources::pki::{crypto_provider, pem_certs};

pub const CONFIGMAP_NAMESPACE: &str = "kube-system";
pub const CONFIGMAP_NAME: &str = "extension-apiserver-authentication";

#[derive(Debug, thiserror::Error)]
pub enum TrustError {
    #[error("cannot read {path}: {cause}")]
    Read { path: String, cause: std::io::Error },
    #[error("{origin}: no usable PEM CA certificate")]
    NoCertificate { origin: String },
    #[error("{origin}: {message}")]
    Invalid { origin: String, message: String },
    #[error("reading ConfigMap {CONFIGMAP_NAMESPACE}/{CONFIGMAP_NAME}: {0}")]
    Lookup(String),
}

/// A set of CA certificates and a verifier for client chains that end in one of them.
#[derive(Debug)]
pub struct CaBundle {
    verifier: Arc<dyn ClientCertVerifier>,
    subjects: Vec<DistinguishedName>,
    pub origin: String,
    /// Recent verdicts, found by the leaf's trailing bytes (its signature) and confirmed by
    /// comparing the whole chain, so no digest is computed per request and a lookup can never
    /// return another chain's verdict. Signature verification per request would dominate the serve
    /// path, and the aggregator presents the same front-proxy chain on every request. A verdict is
    /// reused for at most `VERDICT_TTL`, so expiry is still noticed, and a rotated CA builds a new
    /// bundle with an empty memo. Bounded (`MAX_VERDICTS`), least recently used out first;
    /// keys are what any peer presents, so they keep SipHash (std's `RandomState`).
    verdicts: std::sync::Mutex<lru::LruCache<Vec<u8>, Verdict, std::hash::RandomState>>,
}

/// The leaf's (CN, O) once the chain verified, or why it could not be read.
pub type VerifiedSubject = Result<(String, Vec<String>), String>;

#[derive(Debug)]
struct Verdict {
    chain: Vec<Vec<u8>>,
    /// `None`: the chain does not verify against this bundle.
    subject: Option<VerifiedSubject>,
    at: std::time::Instant,
}

/// How many trailing bytes of the leaf (inside its signature) pick the memo slot.
const VERDICT_KEY_BYTES: usize = 64;

const VERDICT_TTL: std::time::Duration = std::time::Duration::from_secs(30);
const MAX_VERDICTS: std::num::NonZeroUsize = std::num::NonZeroUsize::new(1024).unwrap();

impl CaBundle {
    pub fn from_pem(pem: &[u8], origin: &str) -> Result<Self, TrustError> {
        let certs = pem_certs(pem).map_err(|message| TrustError::Invalid {
            origin: origin.to_string(),
            message,
        })?;
        let mut roots = RootCertStore::empty();
        let (added, _) = roots.add_parsable_certificates(certs);
        if added == 0 {
            return Err(TrustError::NoCertificate {
                origin: origin.to_string(),
            });
        }
        let subjects = roots.subjects();
        // webpki checks the chain, validity and ExtKeyUsage clientAuth (docs/hpa-behaviour.md §3.2).
        let verifier =
            WebPkiClientVerifier::builder_with_provider(Arc::new(roots), crypto_provider())
                .build()
                .map_err(|e| TrustError::Invalid {
                    origin: origin.to_string(),
                    message: e.to_string(),
                })?;
        Ok(CaBundle {
            verifier,
            subjects,
            origin: origin.to_string(),
            verdicts: std::sync::Mutex::new(hpa_bridge_engine::bounded_lru::bounded_lru(
                MAX_VERDICTS,
            )),
        })
    }

    /// Does `chain` (leaf first) verify against this bundle, now?
    pub fn verifies(&self, chain: &[CertificateDer<'_>]) -> bool {
        self.verified_subject(chain).is_some()
    }

    /// The leaf's subject if `chain` verifies against this bundle now; memoized with the
    /// verdict, so neither the signature check nor the certificate parse runs per request.
    pub fn verified_subject(&self, chain: &[CertificateDer<'_>]) -> Option<VerifiedSubject> {
        let (leaf, intermediates) = chain.split_first()?;
        let leaf_bytes: &[u8] = leaf.as_ref();
        let key = &leaf_bytes[leaf_bytes.len().saturating_sub(VERDICT_KEY_BYTES)..];
        let same_chain = |v: &Verdict| {
            v.chain.len() == chain.len()
                && v.chain
                    .iter()
                    .zip(chain)
                    .all(|(a, b)| a.as_slice() == b.as_ref())
        };
        let now = std::time::Instant::now();
        {
            let mut memo = self.verdicts.lock().unwrap_or_else(|e| e.into_inner());
            if let Some(v) = memo.get(key) {
                if same_chain(v) && now.duration_since(v.at) < VERDICT_TTL {
                    return v.subject.clone();
                }
            }
        }
        let subject = self
            .verifier
            .verify_client_cert(leaf, intermediates, UnixTime::now())
            .is_ok()
            .then(|| super::x509::subject(leaf).map_err(|e| e.to_string()));
        let mut memo = self.verdicts.lock().unwrap_or_else(|e| e.into_inner());
        memo.put(
            key.to_vec(),
            Verdict {
                chain: chain.iter().map(|c| c.as_ref().to_vec()).collect(),
                subject: subject.clone(),
                at: now,
            },
        );
        subject
    }
}

#[derive(Debug)]
pub struct RequestHeaderTrust {
    pub ca: CaBundle,
    pub config: RequestHeaderConfig,
}

impl RequestHeaderTrust {
    /// Whether `chain` is the front proxy's: it verifies against the requestheader CA and its
    /// CN is an allowed name.
    pub fn is_front_proxy(&self, chain: &[CertificateDer<'_>]) -> bool {
        matches!(self.ca.verified_subject(chain), Some(Ok((cn, _))) if self.config.name_allowed(&cn))
    }
}

/// The trust in force now.
#[derive(Debug, Default)]
pub struct TrustBundle {
    pub request_header: Option<RequestHeaderTrust>,
    pub client_ca: Option<CaBundle>,
    inputs: TrustInputs,
}

impl TrustBundle {
    /// Where the requestheader CA and the client CA came from, for logs (`-` when unset).
    pub fn origins(&self) -> (&str, &str) {
        (
            self.request_header
                .as_ref()
                .map(|r| r.ca.origin.as_str())
                .unwrap_or("-"),
            self.client_ca
                .as_ref()
                .map(|c| c.origin.as_str())
                .unwrap_or("-"),
        )
    }
}

/// The raw inputs a bundle was built from, to notice changes without rebuilding verifiers.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
struct TrustInputs {
    request_header: Option<(Vec<u8>, RequestHeaderConfig, String)>,
    client_ca: Option<(Vec<u8>, String)>,
}

impl TrustInputs {
    fn build(&self) -> Result<TrustBundle, TrustError> {
        let request_header = match &self.request_header {
            Some((pem, config, origin)) => Some(RequestHeaderTrust {
                ca: CaBundle::from_pem(pem, origin)?,
                config: config.clone(),
            }),
            None => None,
        };
        let client_ca = match &self.client_ca {
            Some((pem, origin)) => Some(CaBundle::from_pem(pem, origin)?),
            None => None,
        };
        Ok(TrustBundle {
            request_header,
            client_ca,
            inputs: self.clone(),
        })
    }
}

/// Where trust comes from. A file flag wins over the ConfigMap for its part, as in
/// k8s.io/apiserver: `--client-ca-file` replaces `client-ca-file`, and
/// `--requestheader-client-ca-file` replaces every `requestheader-*` key.
#[derive(Clone, Default)]
pub struct TrustSettings {
    pub requestheader_client_ca_file: Option<PathBuf>,
    pub requestheader: RequestHeaderConfig,
    pub client_ca_file: Option<PathBuf>,
    /// Read the ConfigMap with this client; `None` skips the lookup.
    pub lookup: Option<kube::Client>,
}

impl std::fmt::Debug for TrustSettings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TrustSettings")
            .field(
                "requestheader_client_ca_file",
                &self.requestheader_client_ca_file,
            )
            .field("requestheader", &self.requestheader)
            .field("client_ca_file", &self.client_ca_file)
            .field("lookup", &self.lookup.is_some())
            .finish()
    }
}

/// The parts of the ConfigMap's `data` that matter, parsed.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ConfigMapTrust {
    pub client_ca: Option<Vec<u8>>,
    pub request_header: Option<(Vec<u8>, RequestHeaderConfig)>,
}

/// Parse `extension-apiserver-authentication`'s data: PEM under `client-ca-file` and
/// `requestheader-client-ca-file`, JSON string arrays under the other `requestheader-*` keys.
/// An absent header-name key keeps the k8s default name.
pub fn parse_configmap(data: &BTreeMap<String, String>) -> Result<ConfigMapTrust, TrustError> {
    fn list(data: &BTreeMap<String, String>, key: &str) -> Result<Option<Vec<String>>, TrustError> {
        match data.get(key).map(|s| s.trim()).filter(|s| !s.is_empty()) {
            None => Ok(None),
            Some(s) => serde_json::from_str::<Vec<String>>(s)
                .map(Some)
                .map_err(|e| TrustError::Invalid {
                    origin: format!("ConfigMap {CONFIGMAP_NAMESPACE}/{CONFIGMAP_NAME} key {key}"),
                    message: format!("expected a JSON array of strings: {e}"),
                }),
        }
    }
    let pem = |key: &str| {
        data.get(key)
            .filter(|s| !s.trim().is_empty())
            .map(|s| s.as_bytes().to_vec())
    };
    let request_header = match pem("requestheader-client-ca-file") {
        None => None,
        Some(ca) => {
            let defaults = RequestHeaderConfig::default();
            let config = RequestHeaderConfig {
                allowed_names: list(data, "requestheader-allowed-names")?.unwrap_or_default(),
                username_headers: list(data, "requestheader-username-headers")?
                    .unwrap_or(defaults.username_headers),
                group_headers: list(data, "requestheader-group-headers")?
                    .unwrap_or(defaults.group_headers),
                extra_headers_prefixes: list(data, "requestheader-extra-headers-prefix")?
                    .unwrap_or(defaults.extra_headers_prefixes),
            };
            Some((ca, config))
        }
    };
    Ok(ConfigMapTrust {
        client_ca: pem("client-ca-file"),
        request_header,
    })
}

/// The current trust, swapped atomically on change, plus the handshake verifier over it.
pub struct TrustStore {
    settings: TrustSettings,
    current: RwLock<Arc<TrustBundle>>,
    /// rustls borrows root hints from the verifier for the whole handshake, so they must outlive
    /// any lock. Each distinct set is leaked once: CA rotations are rare, and a few hundred bytes
    /// per rotation is the price of advertising the right CA names to Go clients.
    hints: RwLock<&'static [DistinguishedName]>,
}

impl std::fmt::Debug for TrustStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TrustStore")
            .field("settings", &self.settings)
            .finish_non_exhaustive()
    }
}

fn read_file(path: &PathBuf) -> Result<Vec<u8>, TrustError> {
    std::fs::read(path).map_err(|cause| TrustError::Read {
        path: path.display().to_string(),
        cause,
    })
}

impl TrustStore {
    /// Load once. With `tolerate_lookup_failure`, a ConfigMap that cannot be read leaves its
    /// parts empty (and the reloader keeps trying); otherwise it is an error.
    pub async fn load(
        settings: TrustSettings,
        tolerate_lookup_failure: bool,
    ) -> Result<Arc<Self>, TrustError> {
        let store = Arc::new(TrustStore {
            settings,
            current: RwLock::new(Arc::new(TrustBundle::default())),
            hints: RwLock::new(&[]),
        });
        match store.reload().await {
            Ok(_) => {}
            Err(e @ TrustError::Lookup(_)) if tolerate_lookup_failure => {
                tracing::warn!(error = %e, "continuing without the ConfigMap's trust (--authentication-tolerate-lookup-failure)");
                let inputs = store.inputs(None)?;
                store.install(inputs.build()?);
            }
            Err(e) => return Err(e),
        }
        Ok(store)
    }

    pub fn current(&self) -> Arc<TrustBundle> {
        self.current
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// Is any client certificate trusted at all?
    pub fn has_client_trust(&self) -> bool {
        let t = self.current();
        t.request_header.is_some() || t.client_ca.is_some()
    }

    async fn fetch_configmap(&self) -> Result<Option<ConfigMapTrust>, TrustError> {
        let Some(client) = &self.settings.lookup else {
            return Ok(None);
        };
        let api: kube::Api<ConfigMap> = kube::Api::namespaced(client.clone(), CONFIGMAP_NAMESPACE);
        let cm = tokio::time::timeout(Duration::from_secs(10), api.get_opt(CONFIGMAP_NAME))
            .await
            .map_err(|_| TrustError::Lookup("timed out after 10s".into()))?
            .map_err(|e| TrustError::Lookup(e.to_string()))?;
        match cm {
            None => {
                // Clusters without an aggregation layer have no such ConfigMap; flags must do.
                tracing::debug!("ConfigMap {CONFIGMAP_NAMESPACE}/{CONFIGMAP_NAME} not found");
                Ok(None)
            }
            Some(cm) => parse_configmap(&cm.data.unwrap_or_default()).map(Some),
        }
    }

    fn inputs(&self, cm: Option<ConfigMapTrust>) -> Result<TrustInputs, TrustError> {
        let cm_origin = format!("ConfigMap {CONFIGMAP_NAMESPACE}/{CONFIGMAP_NAME}");
        let cm = cm.unwrap_or_default();
        let request_header = match &self.settings.requestheader_client_ca_file {
            Some(p) => Some((
                read_file(p)?,
                self.settings.requestheader.clone(),
                p.display().to_string(),
            )),
            None => cm.request_header.map(|(pem, config)| {
                (
                    pem,
                    config,
                    format!("{cm_origin} requestheader-client-ca-file"),
                )
            }),
        };
        let client_ca = match &self.settings.client_ca_file {
            Some(p) => Some((read_file(p)?, p.display().to_string())),
            None => cm
                .client_ca
                .map(|pem| (pem, format!("{cm_origin} client-ca-file"))),
        };
        Ok(TrustInputs {
            request_header,
            client_ca,
        })
    }

    /// Re-read files and the ConfigMap; swap in the new trust if anything changed.
    pub async fn reload(&self) -> Result<bool, TrustError> {
        let cm = self.fetch_configmap().await?;
        let inputs = self.inputs(cm)?;
        if inputs == self.current().inputs {
            return Ok(false);
        }
        self.install(inputs.build()?);
        Ok(true)
    }

    fn install(&self, bundle: TrustBundle) {
        let mut subjects: Vec<DistinguishedName> = Vec::new();
        for ca in bundle
            .request_header
            .as_ref()
            .map(|r| &r.ca)
            .into_iter()
            .chain(bundle.client_ca.as_ref())
        {
            for s in &ca.subjects {
                if !subjects.iter().any(|have| have.as_ref() == s.as_ref()) {
                    subjects.push(s.clone());
                }
            }
        }
        let current_hints: &[DistinguishedName] =
            *self.hints.read().unwrap_or_else(|e| e.into_inner());
        let same_hints = current_hints.len() == subjects.len()
            && current_hints
                .iter()
                .zip(&subjects)
                .all(|(a, b)| a.as_ref() == b.as_ref());
        if !same_hints {
            let leaked: &'static [DistinguishedName] = Box::leak(subjects.into_boxed_slice());
            *self.hints.write().unwrap_or_else(|e| e.into_inner()) = leaked;
        }
        *self.current.write().unwrap_or_else(|e| e.into_inner()) = Arc::new(bundle);
    }

    /// Re-read every `period` for as long as the process lives; a failed read keeps the old trust.
    pub fn spawn_reloader(self: &Arc<Self>, period: Duration) {
        let me = self.clone();
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(period);
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            tick.tick().await;
            loop {
                tick.tick().await;
                match me.reload().await {
                    Ok(true) => {
                        let t = me.current();
                        let (requestheader_ca, client_ca) = t.origins();
                        tracing::info!(
                            requestheader_ca,
                            client_ca,
                            "client certificate trust reloaded"
                        );
                    }
                    Ok(false) => {}
                    Err(e) => {
                        tracing::warn!(error = %e, "reloading client certificate trust failed; keeping the old trust")
                    }
                }
            }
        });
    }

    /// The TLS handshake verifier over this store.
    pub fn client_verifier(self: &Arc<Self>) -> Arc<dyn ClientCertVerifier> {
        Arc::new(TrustVerifier {
            store: self.clone(),
            provider: crypto_provider(),
        })
    }
}

/// Offers (never requires) a client certificate, and accepts a chain that verifies against the
/// requestheader CA or the client CA. Which one, and what it means, is decided per request.
#[derive(Debug)]
struct TrustVerifier {
    store: Arc<TrustStore>,
    provider: Arc<rustls::crypto::CryptoProvider>,
}

impl ClientCertVerifier for TrustVerifier {
    fn offer_client_auth(&self) -> bool {
        self.store.has_client_trust()
    }

    fn client_auth_mandatory(&self) -> bool {
        // Anonymous health probes and bearer-token callers connect without a certificate.
        false
    }

    fn root_hint_subjects(&self) -> &[DistinguishedName] {
        *self.store.hints.read().unwrap_or_else(|e| e.into_inner())
    }

    fn verify_client_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        now: UnixTime,
    ) -> Result<ClientCertVerified, rustls::Error> {
        let trust = self.store.current();
        let mut first_error = None;
        for ca in trust
            .request_header
            .as_ref()
            .map(|r| &r.ca)
            .into_iter()
            .chain(trust.client_ca.as_ref())
        {
            match ca
                .verifier
                .verify_client_cert(end_entity, intermediates, now)
            {
                Ok(v) => return Ok(v),
                Err(e) => {
                    first_error.get_or_insert(e);
                }
            }
        }
        Err(first_error.unwrap_or(rustls::Error::General(
            "no client certificate authority is configured".into(),
        )))
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(
            message,
            cert,
            dss,
            &self.provider.signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(
            message,
            cert,
            dss,
            &self.provider.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.provider
            .signature_verification_algorithms
            .supported_schemes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_full_verdict_memo_forgets_the_least_recently_presented_chain() {
        let key = rcgen::KeyPair::generate().unwrap();
        let mut params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
        params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
        let ca = params.self_signed(&key).unwrap();
        let bundle = CaBundle::from_pem(ca.pem().as_bytes(), "ca.crt").unwrap();
        // Chains that do not verify are remembered as such, like any other.
        let leaf = |n: usize| format!("not a certificate {n}").into_bytes();
        let present = |n: usize| bundle.verifies(&[CertificateDer::from(leaf(n))]);
        let memo = |n: usize| bundle.verdicts.lock().unwrap().contains(leaf(n).as_slice());
        for n in 0..MAX_VERDICTS.get() {
            assert!(!present(n));
        }
        assert!(memo(0));
        present(0);
        present(MAX_VERDICTS.get());
        assert!(memo(0), "the chain just presented stays");
        assert!(!memo(1), "the least recent goes");
        assert!(memo(MAX_VERDICTS.get()));
    }

    fn data(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn configmap_keys() {
        let t = parse_configmap(&data(&[
            ("client-ca-file", "PEM1"),
            ("requestheader-client-ca-file", "PEM2"),
            ("requestheader-allowed-names", "[\"front-proxy-client\"]"),
            ("requestheader-username-headers", "[\"X-Remote-User\"]"),
            ("requestheader-group-headers", "[\"X-Remote-Group\"]"),
            (
                "requestheader-extra-headers-prefix",
                "[\"X-Remote-Extra-\"]",
            ),
        ]))
        .unwrap();
        assert_eq!(t.client_ca.as_deref(), Some(&b"PEM1"[..]));
        let (ca, config) = t.request_header.unwrap();
        assert_eq!(ca, b"PEM2");
        assert_eq!(config.allowed_names, vec!["front-proxy-client"]);
        assert_eq!(
            config,
            RequestHeaderConfig {
                allowed_names: vec!["front-proxy-client".into()],
                ..Default::default()
            }
        );
    }

    #[test]
    fn configmap_without_requestheader_ca_has_no_front_proxy() {
        let t = parse_configmap(&data(&[("requestheader-allowed-names", "[]")])).unwrap();
        assert_eq!(t, ConfigMapTrust::default());
    }

    #[test]
    fn configmap_bad_json_names_the_key() {
        let e = parse_configmap(&data(&[
            ("requestheader-client-ca-file", "PEM"),
            ("requestheader-allowed-names", "front-proxy-client"),
        ]))
        .unwrap_err();
        assert!(e.to_string().contains("requestheader-allowed-names"), "{e}");
    }

    #[test]
    fn bundle_rejects_non_pem() {
        assert!(matches!(
            CaBundle::from_pem(b"not a certificate", "x"),
            Err(TrustError::NoCertificate { .. })
        ));
    }

    #[test]
    fn bundle_names_a_broken_section_and_its_origin() {
        let e = CaBundle::from_pem(b"-----BEGIN CERTIFICATE-----\nMIIB\n", "client-ca.crt")
            .err()
            .unwrap();
        assert_eq!(
            e.to_string(),
            "client-ca.crt: section end \"-----END CERTIFICATE-----\" missing"
        );
    }
}
