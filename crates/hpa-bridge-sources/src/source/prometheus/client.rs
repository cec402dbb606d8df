//! The HTTP client: TLS (a CA file, or no verification when asked), form encoding of queries.

use super::*;

/// The configuration cannot be turned into a working client.
#[derive(Debug, thiserror::Error)]
pub enum PrometheusSetupError {
    #[error("source.prometheus.url {url:?}: {message}")]
    Url { url: String, message: String },
    #[error("source.prometheus.headers: {0}")]
    Header(String),
    #[error("source.prometheus.tls.caFile {path}: {message}")]
    CaFile { path: String, message: String },
    #[error("source.prometheus.tls: {0}")]
    Tls(String),
}

/// `insecureSkipVerify: true`. Signatures are still checked so the handshake is well-formed;
/// the certificate chain and name are not.
#[derive(Debug)]
pub(crate) struct AcceptAnyServerCert(Arc<CryptoProvider>);

impl ServerCertVerifier for AcceptAnyServerCert {
    fn verify_server_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        _now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}

pub(crate) fn build_client(
    cfg: &PrometheusSourceConfig,
) -> Result<Client<HttpsConnector<HttpConnector>, Full<Bytes>>, PrometheusSetupError> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let tls_err = |e: rustls::Error| PrometheusSetupError::Tls(e.to_string());
    let builder = hyper_rustls::HttpsConnectorBuilder::new();
    let builder = if cfg.tls.insecure_skip_verify {
        let tls = rustls::ClientConfig::builder_with_provider(provider.clone())
            .with_safe_default_protocol_versions()
            .map_err(tls_err)?
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(AcceptAnyServerCert(provider)))
            .with_no_client_auth();
        builder.with_tls_config(tls)
    } else if let Some(path) = &cfg.tls.ca_file {
        let ca_err = |message: String| PrometheusSetupError::CaFile {
            path: path.clone(),
            message,
        };
        let pem = std::fs::read(path).map_err(|e| ca_err(e.to_string()))?;
        let mut roots = rustls::RootCertStore::empty();
        for cert in crate::pki::pem_certs(&pem).map_err(ca_err)? {
            roots.add(cert).map_err(|e| ca_err(e.to_string()))?;
        }
        if roots.is_empty() {
            return Err(ca_err("no PEM certificates found".into()));
        }
        let tls = rustls::ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .map_err(tls_err)?
            .with_root_certificates(roots)
            .with_no_client_auth();
        builder.with_tls_config(tls)
    } else {
        builder
            .with_provider_and_native_roots(provider)
            .map_err(|e| PrometheusSetupError::Tls(format!("loading system roots: {e}")))?
    };
    let mut http = HttpConnector::new();
    http.enforce_http(false);
    http.set_connect_timeout(Some(cfg.timeout.0));
    http.set_nodelay(true);
    let connector = builder.https_or_http().enable_http1().wrap_connector(http);
    Ok(Client::builder(TokioExecutor::new())
        .pool_idle_timeout(Duration::from_secs(90))
        .build(connector))
}

pub(crate) const FORM: &percent_encoding::AsciiSet = &percent_encoding::NON_ALPHANUMERIC
    .remove(b'-')
    .remove(b'_')
    .remove(b'.')
    .remove(b'~');

pub(crate) fn form_field(key: &str, value: &str) -> String {
    format!(
        "{key}={}",
        percent_encoding::utf8_percent_encode(value, FORM)
    )
}

/// Seconds with millisecond precision, as `/api/v1/query?time=` takes them.
pub(crate) fn prom_time(ms: Millis) -> String {
    format!("{}.{:03}", ms.div_euclid(1000), ms.rem_euclid(1000))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn ca_file_error(text: &str) -> (String, String) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("ca.crt").display().to_string();
        std::fs::write(&path, text).unwrap();
        let cfg: PrometheusSourceConfig = serde_json::from_value(json!({
            "url": "https://prometheus:9090",
            "tls": {"caFile": path},
        }))
        .unwrap();
        let e = build_client(&cfg).err().unwrap();
        assert!(matches!(e, PrometheusSetupError::CaFile { .. }), "{e:?}");
        (path, e.to_string())
    }

    #[test]
    fn a_ca_file_without_certificates_is_named() {
        let (path, e) = ca_file_error("not a certificate\n");
        assert_eq!(
            e,
            format!("source.prometheus.tls.caFile {path}: no PEM certificates found")
        );
    }

    #[test]
    fn a_ca_file_with_a_broken_section_is_named() {
        let (path, e) = ca_file_error("-----BEGIN CERTIFICATE-----\nMIIB\n");
        assert_eq!(
            e,
            format!(
                "source.prometheus.tls.caFile {path}: section end \"-----END CERTIFICATE-----\" missing"
            )
        );
    }
}
