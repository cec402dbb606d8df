//! Serving TLS: certificate files re-read on change, or a self-signed certificate generated at
//! startup for local use. PEM reading is the sources crate's `pki`, which its clients share.

use std::path::{Path, PathBuf};
use std::sync::{Arc, RwLock};
use std::time::{Duration, SystemTime};

use rustls::pki_types::pem::{self, PemObject};
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::server::{ClientHello, ResolvesServerCert};
use rustls::sign::CertifiedKey;
use sha2::{Digest, Sha256};

use hpa_bridge_sources::pki::{crypto_provider, pem_certs, pem_error_message};

#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    #[error("cannot read {path}: {cause}")]
    Read { path: String, cause: std::io::Error },
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

pub fn read_pem_certs(path: &Path) -> Result<Vec<CertificateDer<'static>>, TlsError> {
    let bytes = std::fs::read(path).map_err(|cause| TlsError::Read {
        path: path.display().to_string(),
        cause,
    })?;
    let certs = pem_certs(&bytes).map_err(|message| TlsError::Pem {
        path: path.display().to_string(),
        message,
    })?;
    if certs.is_empty() {
        return Err(TlsError::NoCertificate {
            path: path.display().to_string(),
        });
    }
    Ok(certs)
}

fn read_pem_key(path: &Path) -> Result<PrivateKeyDer<'static>, TlsError> {
    let bytes = std::fs::read(path).map_err(|cause| TlsError::Read {
        path: path.display().to_string(),
        cause,
    })?;
    PrivateKeyDer::from_pem_slice(&bytes).map_err(|e| match e {
        pem::Error::NoItemsFound => TlsError::NoKey {
            path: path.display().to_string(),
        },
        e => TlsError::Pem {
            path: path.display().to_string(),
            message: pem_error_message(&e),
        },
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

#[cfg(test)]
mod tests {
    use super::*;

    /// A certificate and its key as PEM, and a directory to write files into.
    fn pair() -> (String, String, tempfile::TempDir) {
        let generated = rcgen::generate_simple_self_signed(vec!["localhost".to_string()]).unwrap();
        (
            generated.cert.pem(),
            generated.signing_key.serialize_pem(),
            tempfile::tempdir().unwrap(),
        )
    }

    fn write(dir: &tempfile::TempDir, name: &str, text: &str) -> PathBuf {
        let path = dir.path().join(name);
        std::fs::write(&path, text).unwrap();
        path
    }

    #[test]
    fn a_good_pair_loads() {
        let (cert, key, dir) = pair();
        let served = ServingCert::from_files(
            &write(&dir, "tls.crt", &cert),
            &write(&dir, "tls.key", &key),
        )
        .unwrap();
        assert_eq!(served.certificate_chain().len(), 1);
    }

    #[test]
    fn a_certificate_file_without_a_certificate_names_the_file() {
        let (_, key, dir) = pair();
        let path = write(&dir, "tls.crt", &key);
        let e = read_pem_certs(&path).unwrap_err();
        assert!(matches!(e, TlsError::NoCertificate { .. }), "{e:?}");
        assert_eq!(
            e.to_string(),
            format!("{}: no PEM certificate found", path.display())
        );
    }

    #[test]
    fn a_key_file_without_a_key_names_the_file() {
        let (cert, _, dir) = pair();
        let path = write(&dir, "tls.key", &cert);
        let e = read_pem_key(&path).unwrap_err();
        assert!(matches!(e, TlsError::NoKey { .. }), "{e:?}");
        assert_eq!(
            e.to_string(),
            format!("{}: no PEM private key found", path.display())
        );
    }

    #[test]
    fn an_unterminated_section_is_named_as_text_with_the_file() {
        let (cert, key, dir) = pair();
        let cut = |pem: &str| pem.lines().take(3).collect::<Vec<_>>().join("\n");
        let cert_path = write(&dir, "tls.crt", &cut(&cert));
        let e = read_pem_certs(&cert_path).unwrap_err();
        assert_eq!(
            e.to_string(),
            format!(
                "{}: section end \"-----END CERTIFICATE-----\" missing",
                cert_path.display()
            )
        );
        // A broken key section is a PEM error, not "no key".
        let key_path = write(&dir, "tls.key", &cut(&key));
        let e = read_pem_key(&key_path).unwrap_err();
        assert_eq!(
            e.to_string(),
            format!(
                "{}: section end \"-----END PRIVATE KEY-----\" missing",
                key_path.display()
            )
        );
    }

    #[test]
    fn a_section_that_is_not_base64_names_the_file() {
        let (_, _, dir) = pair();
        let path = write(
            &dir,
            "tls.crt",
            "-----BEGIN CERTIFICATE-----\n!!!!\n-----END CERTIFICATE-----\n",
        );
        let e = read_pem_certs(&path).unwrap_err();
        assert!(matches!(e, TlsError::Pem { .. }), "{e:?}");
        assert!(
            e.to_string()
                .starts_with(&format!("{}: base64 decode error", path.display())),
            "{e}"
        );
    }
}
