//! Names in an already-verified client certificate: user = CN, groups = O (docs/hpa-behaviour.md §3.2).

use rustls::pki_types::CertificateDer;
use x509_parser::prelude::{FromDer, X509Certificate};

#[derive(Debug, thiserror::Error, Clone, PartialEq, Eq)]
pub enum SubjectError {
    #[error("the client certificate cannot be parsed: {0}")]
    Parse(String),
}

/// (CN, every O) of the certificate's subject. A missing CN is the empty string.
///
/// With several CN attributes the LAST one counts, as in Go's `pkix.Name.FillFromRDNSequence`,
/// which kube-apiserver uses for both the front-proxy allowed-names check and the x509 user
/// (docs/hpa-behaviour.md §3.2): reading the first would accept a proxy certificate
/// `CN=front-proxy-client, CN=evil` that the API server refuses, and make
/// `CN=system:admin, CN=bob` an admin.
pub fn subject(cert: &CertificateDer<'_>) -> Result<(String, Vec<String>), SubjectError> {
    let (_, parsed) =
        X509Certificate::from_der(cert.as_ref()).map_err(|e| SubjectError::Parse(e.to_string()))?;
    let subject = parsed.subject();
    let cn = subject
        .iter_common_name()
        .last()
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

/// A certificate subject with two CN attributes, `first` then `second`: Go's x509 keeps the last,
/// and so must `common_name`. rcgen keeps one value per attribute type, so the second CN goes in
/// under its OID (2.5.4.3) as a custom type. For the tests here and the integration tests.
#[cfg(any(test, feature = "test-support"))]
pub fn two_cn_params(first: &str, second: &str) -> rcgen::CertificateParams {
    let mut params = rcgen::CertificateParams::new(Vec::<String>::new())
        .expect("no subject alternative names to parse");
    params
        .distinguished_name
        .push(rcgen::DnType::CommonName, first);
    params.distinguished_name.push(
        rcgen::DnType::CustomDnType(vec![2, 5, 4, 3]),
        rcgen::DnValue::Utf8String(second.into()),
    );
    params
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

    #[test]
    fn the_last_of_two_common_names_counts_as_in_go() {
        for (first, second) in [("system:admin", "bob"), ("bob", "system:admin")] {
            let key = rcgen::KeyPair::generate().unwrap();
            let cert = two_cn_params(first, second).self_signed(&key).unwrap();
            let (_, parsed) = X509Certificate::from_der(cert.der().as_ref()).unwrap();
            assert_eq!(
                parsed.subject().iter_common_name().count(),
                2,
                "the certificate carries both CNs"
            );
            assert_eq!(common_name(cert.der()).unwrap(), second);
        }
    }
}
