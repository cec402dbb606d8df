//! Names in an already-verified client certificate: user = CN, groups = O (REFERENCE.md §3.2).

use rustls::pki_types::CertificateDer;
use x509_parser::prelude::{FromDer, X509Certificate};

#[derive(Debug, thiserror::Error, Clone, PartialEq, Eq)]
pub enum SubjectError {
    #[error("the client certificate cannot be parsed: {0}")]
    Parse(String),
}

/// (CN, every O) of the certificate's subject. A missing CN is the empty string.
pub fn subject(cert: &CertificateDer<'_>) -> Result<(String, Vec<String>), SubjectError> {
    let (_, parsed) =
        X509Certificate::from_der(cert.as_ref()).map_err(|e| SubjectError::Parse(e.to_string()))?;
    let subject = parsed.subject();
    let cn = subject
        .iter_common_name()
        .next()
        .map(|a| a.as_str().map(String::from))
        .transpose()
        .map_err(|e| SubjectError::Parse(e.to_string()))?
        .unwrap_or_default();
    let orgs = subject
        .iter_organization()
        .map(|a| {
            a.as_str()
                .map(String::from)
                .map_err(|e| SubjectError::Parse(e.to_string()))
        })
        .collect::<Result<Vec<_>, _>>()?;
    Ok((cn, orgs))
}

pub fn common_name(cert: &CertificateDer<'_>) -> Result<String, SubjectError> {
    subject(cert).map(|(cn, _)| cn)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cn_and_orgs() {
        let mut params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
        params
            .distinguished_name
            .push(rcgen::DnType::CommonName, "alice");
        params
            .distinguished_name
            .push(rcgen::DnType::OrganizationName, "team-a");
        let key = rcgen::KeyPair::generate().unwrap();
        let cert = params.self_signed(&key).unwrap();
        let (cn, orgs) = subject(cert.der()).unwrap();
        assert_eq!(cn, "alice");
        assert_eq!(orgs, vec!["team-a"]);
        assert!(subject(&CertificateDer::from(vec![1, 2, 3])).is_err());
    }
}
