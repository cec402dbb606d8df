//! A certificate authority generated in the process, and the leaf certificates it signs: the
//! PKI the tests and the bench build their TLS from (the serving certificates, the client and
//! front-proxy CAs, the stand-in API server's).

use rustls::pki_types::{CertificateDer, PrivateKeyDer};

pub struct Authority {
    params: rcgen::CertificateParams,
    key: rcgen::KeyPair,
    cert: rcgen::Certificate,
}

/// A certificate and its key, in PEM and DER.
pub struct Leaf {
    pub cert_pem: String,
    pub key_pem: String,
    pub cert_der: CertificateDer<'static>,
    pub key_der: PrivateKeyDer<'static>,
}

impl Authority {
    /// A self-signed CA named `cn`.
    pub fn new(cn: &str) -> Result<Self, rcgen::Error> {
        let mut params = rcgen::CertificateParams::new(Vec::<String>::new())?;
        params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
        params
            .distinguished_name
            .push(rcgen::DnType::CommonName, cn);
        params.key_usages = vec![
            rcgen::KeyUsagePurpose::KeyCertSign,
            rcgen::KeyUsagePurpose::CrlSign,
            rcgen::KeyUsagePurpose::DigitalSignature,
        ];
        let key = rcgen::KeyPair::generate()?;
        let cert = params.self_signed(&key)?;
        Ok(Authority { params, key, cert })
    }

    pub fn pem(&self) -> String {
        self.cert.pem()
    }

    pub fn der(&self) -> CertificateDer<'static> {
        self.cert.der().clone()
    }

    /// A leaf for `params`, signed by this CA with a fresh key.
    pub fn issue(&self, params: rcgen::CertificateParams) -> Result<Leaf, rcgen::Error> {
        let key = rcgen::KeyPair::generate()?;
        let issuer = rcgen::Issuer::from_params(&self.params, &self.key);
        let cert = params.signed_by(&key, &issuer)?;
        Ok(Leaf {
            cert_pem: cert.pem(),
            key_pem: key.serialize_pem(),
            cert_der: cert.der().clone(),
            key_der: PrivateKeyDer::Pkcs8(key.serialize_der().into()),
        })
    }

    /// A serving certificate for `names` (DNS names or IP addresses).
    pub fn server(&self, names: &[&str]) -> Result<Leaf, rcgen::Error> {
        let mut params =
            rcgen::CertificateParams::new(names.iter().map(|n| n.to_string()).collect::<Vec<_>>())?;
        params.extended_key_usages = vec![rcgen::ExtendedKeyUsagePurpose::ServerAuth];
        self.issue(params)
    }

    /// A client certificate whose user is `cn` and groups `orgs`.
    pub fn client(&self, cn: &str, orgs: &[&str]) -> Result<Leaf, rcgen::Error> {
        let mut params = rcgen::CertificateParams::new(Vec::<String>::new())?;
        params
            .distinguished_name
            .push(rcgen::DnType::CommonName, cn);
        for o in orgs {
            params
                .distinguished_name
                .push(rcgen::DnType::OrganizationName, *o);
        }
        params.extended_key_usages = vec![rcgen::ExtendedKeyUsagePurpose::ClientAuth];
        self.issue(params)
    }
}
