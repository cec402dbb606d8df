//! Serving TLS: certificate files re-read on change, or a self-signed certificate generated at
//! startup for local use.

use std::path::{Path, PathBuf};
use std::sync::{Arc, RwLock};
use std::time::{Duration, SystemTime};

use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::server::{ClientHello, ResolvesServerCert};
use rustls::sign::CertifiedKey;
use sha2::{Digest, Sha256};

#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    #[error("cannot read {path}: {source}")]
    Read {
        path: String,
        source: std::io::Error,
    },
    #[error("{path}: no PEM certificate found")]
    NoCertificate { path: String },
    #[error("{path}: no PEM private key found")]
    NoKey { path: String },
    #[error("{path}: {message}")]
    Pem { path: String, message: String },
    #[error("the private key does not fit: {0}")]
    Key(String),
    #[error("generating a self-signed certificate failed: {0}")]
    Generate(String),
    #[error("TLS configuration: {0}")]
    Config(String),
}

pub fn crypto_provider() -> Arc<rustls::crypto::CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

pub fn read_pem_certs(path: &Path) -> Result<Vec<CertificateDer<'static>>, TlsError> {
    let bytes = std::fs::read(path).map_err(|source| TlsError::Read {
        path: path.display().to_string(),
        source,
    })?;
    let certs: Vec<_> = rustls_pemfile::certs(&mut bytes.as_slice())
        .collect::<Result<_, _>>()
        .map_err(|e| TlsError::Pem {
            path: path.display().to_string(),
            message: e.to_string(),
        })?;
    if certs.is_empty() {
        return Err(TlsError::NoCertificate {
            path: path.display().to_string(),
        });
    }
    Ok(certs)
}

fn read_pem_key(path: &Path) -> Result<PrivateKeyDer<'static>, TlsError> {
    let bytes = std::fs::read(path).map_err(|source| TlsError::Read {
        path: path.display().to_string(),
        source,
    })?;
    rustls_pemfile::private_key(&mut bytes.as_slice())
        .map_err(|e| TlsError::Pem {
            path: path.display().to_string(),
            message: e.to_string(),
        })?
        .ok_or_else(|| TlsError::NoKey {
            path: path.display().to_string(),
        })
}

fn certified_key(
    certs: Vec<CertificateDer<'static>>,
    key: PrivateKeyDer<'static>,
) -> Result<Arc<CertifiedKey>, TlsError> {
    let signing = crypto_provider()
        .key_provider
        .load_private_key(key)
        .map_err(|e| TlsError::Key(e.to_string()))?;
    let ck = CertifiedKey::new(certs, signing);
    ck.keys_match().map_err(|e| TlsError::Key(e.to_string()))?;
    Ok(Arc::new(ck))
}

/// SHA-256 of the leaf certificate, as `openssl x509 -fingerprint -sha256` prints it.
pub fn fingerprint(cert: &CertificateDer<'_>) -> String {
    let digest = Sha256::digest(cert.as_ref());
    digest
        .iter()
        .map(|b| format!("{b:02X}"))
        .collect::<Vec<_>>()
        .join(":")
}

/// The serving certificate: fixed, or re-read from files when they change.
#[derive(Debug)]
pub struct ServingCert {
    current: RwLock<Arc<CertifiedKey>>,
    files: Option<(PathBuf, PathBuf)>,
    stamp: RwLock<Option<(SystemTime, SystemTime)>>,
}

fn mtime(p: &Path) -> Option<SystemTime> {
    std::fs::metadata(p).and_then(|m| m.modified()).ok()
}

impl ServingCert {
    pub fn from_files(cert: &Path, key: &Path) -> Result<Arc<Self>, TlsError> {
        let ck = certified_key(read_pem_certs(cert)?, read_pem_key(key)?)?;
        Ok(Arc::new(ServingCert {
            current: RwLock::new(ck),
            files: Some((cert.to_path_buf(), key.to_path_buf())),
            stamp: RwLock::new(mtime(cert).zip(mtime(key))),
        }))
    }

    /// A self-signed certificate for `localhost`, `127.0.0.1`, `::1` and `extra_names`.
    pub fn self_signed(extra_names: &[String]) -> Result<Arc<Self>, TlsError> {
        let mut names = vec!["localhost".to_string(), "127.0.0.1".into(), "::1".into()];
        names.extend(extra_names.iter().cloned());
        let generated = rcgen::generate_simple_self_signed(names)
            .map_err(|e| TlsError::Generate(e.to_string()))?;
        let cert = generated.cert.der().clone();
        let key = PrivateKeyDer::try_from(generated.signing_key.serialize_der())
            .map_err(|e| TlsError::Generate(e.to_string()))?;
        Ok(Arc::new(ServingCert {
            current: RwLock::new(certified_key(vec![cert], key)?),
            files: None,
            stamp: RwLock::new(None),
        }))
    }

    /// The certificates currently served, leaf first: what a client pins to trust a
    /// self-signed instance (`simulate` does).
    pub fn certificate_chain(&self) -> Vec<CertificateDer<'static>> {
        let ck = self.current.read().unwrap_or_else(|e| e.into_inner());
        ck.cert.clone()
    }

    pub fn leaf_fingerprint(&self) -> String {
        let ck = self.current.read().unwrap_or_else(|e| e.into_inner());
        ck.cert.first().map(fingerprint).unwrap_or_default()
    }

    /// Re-read the files if their modification times changed. A broken pair (for example the
    /// certificate written before the key) keeps the old one and is retried on the next check.
    pub fn reload_if_changed(&self) -> Result<bool, TlsError> {
        let Some((cert, key)) = &self.files else {
            return Ok(false);
        };
        let now = mtime(cert).zip(mtime(key));
        if now == *self.stamp.read().unwrap_or_else(|e| e.into_inner()) {
            return Ok(false);
        }
        let ck = certified_key(read_pem_certs(cert)?, read_pem_key(key)?)?;
        *self.current.write().unwrap_or_else(|e| e.into_inner()) = ck;
        *self.stamp.write().unwrap_or_else(|e| e.into_inner()) = now;
        Ok(true)
    }

    /// Poll the files every `period` for as long as the process lives.
    pub fn spawn_reloader(self: &Arc<Self>, period: Duration) {
        if self.files.is_none() {
            return;
        }
        let me = self.clone();
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(period);
            loop {
                tick.tick().await;
                match me.reload_if_changed() {
                    Ok(true) => tracing::info!(
                        fingerprint = %me.leaf_fingerprint(),
                        "serving certificate reloaded"
                    ),
                    Ok(false) => {}
                    Err(e) => {
                        tracing::warn!(error = %e, "serving certificate reload failed; keeping the old one")
                    }
                }
            }
        });
    }
}

impl ResolvesServerCert for ServingCert {
    fn resolve(&self, _hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        Some(
            self.current
                .read()
                .unwrap_or_else(|e| e.into_inner())
                .clone(),
        )
    }
}

/// A rustls server config: TLS 1.2 minimum, h2 and http/1.1, and an optional client
/// certificate verifier (requested, never required: anonymous health probes must connect).
pub fn server_config(
    cert: Arc<ServingCert>,
    client_verifier: Option<Arc<dyn rustls::server::danger::ClientCertVerifier>>,
) -> Result<rustls::ServerConfig, TlsError> {
    let builder = rustls::ServerConfig::builder_with_provider(crypto_provider())
        .with_protocol_versions(&[&rustls::version::TLS13, &rustls::version::TLS12])
        .map_err(|e| TlsError::Config(e.to_string()))?;
    let builder = match client_verifier {
        Some(v) => builder.with_client_cert_verifier(v),
        None => builder.with_no_client_auth(),
    };
    let mut config = builder.with_cert_resolver(cert);
    config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    Ok(config)
}
