//! The TLS material every client and server here reads: PEM certificates, with errors an
//! operator can act on, and the one crypto provider (ring).

use std::sync::Arc;

use rustls::pki_types::pem::{self, PemObject};
use rustls::pki_types::CertificateDer;

/// ring, the one provider every TLS client and server here is built with.
pub fn crypto_provider() -> Arc<rustls::crypto::CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

/// Every certificate in PEM text, other sections skipped; a section that does not decode is an
/// error. No certificate at all is an empty list: each caller names its own source.
pub fn pem_certs(pem: &[u8]) -> Result<Vec<CertificateDer<'static>>, String> {
    CertificateDer::pem_slice_iter(pem)
        .collect::<Result<_, _>>()
        .map_err(|e| pem_error_message(&e))
}

/// pki-types prints the label or line it choked on as a byte array; the operator fixing the
/// file needs the text, and the whole END line the section lacks.
pub fn pem_error_message(e: &pem::Error) -> String {
    match e {
        pem::Error::MissingSectionEnd { end_marker } => format!(
            "section end \"-----END {}-----\" missing",
            String::from_utf8_lossy(end_marker)
        ),
        pem::Error::IllegalSectionStart { line } => {
            format!("illegal section start: {:?}", String::from_utf8_lossy(line))
        }
        e => e.to_string(),
    }
}
