//! TLS to Postgres, as libpq's `sslmode` and `sslrootcert` connection parameters say (rustls on
//! ring; no OpenSSL).
//!
//! | `sslmode` | encrypted | the server's certificate |
//! |---|---|---|
//! | `disable` | never | — |
//! | `prefer` (the default, as in libpq) | when the server offers TLS | not checked |
//! | `require` | always | not checked; with `sslrootcert`, its chain is (as libpq does) |
//! | `verify-ca` | always | signed by a root of `sslrootcert` |
//! | `verify-full` | always | signed by a root of `sslrootcert` and issued for the host connected to |
//!
//! `sslrootcert` names a PEM file of root certificates, or `system` for the system's roots; the
//! verifying modes need it. tokio-postgres reads neither `verify-*` nor `sslrootcert`, so both are
//! taken out of the connection string here before it parses the rest.

use std::sync::Arc;

use rustls::client::WebPkiServerVerifier;
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::{CryptoProvider, WebPkiSupportedAlgorithms};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{
    CertificateError, ClientConfig, DigitallySignedStruct, RootCertStore, SignatureScheme,
};
use tokio_postgres::config::SslMode;
use tokio_postgres_rustls::MakeRustlsConnect;

use crate::StoreError;

/// How a connection uses TLS (libpq's `sslmode`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Mode {
    Disable,
    Prefer,
    Require,
    VerifyCa,
    VerifyFull,
}

impl Mode {
    const NAMES: &'static str = "disable, prefer, require, verify-ca, verify-full";

    fn parse(value: &str) -> Result<Mode, StoreError> {
        Ok(match value {
            "disable" => Mode::Disable,
            // libpq's `allow` tries plain text first; Somna has no use for it, so it is read as
            // `prefer` (encrypted whenever the server can).
            "allow" | "prefer" => Mode::Prefer,
            "require" => Mode::Require,
            "verify-ca" => Mode::VerifyCa,
            "verify-full" => Mode::VerifyFull,
            other => {
                return Err(invalid(format!(
                    "sslmode {other:?} is not one of {}",
                    Mode::NAMES
                )));
            }
        })
    }

    /// What tokio-postgres is told: whether to ask for TLS and whether to insist.
    fn ssl_mode(self) -> SslMode {
        match self {
            Mode::Disable => SslMode::Disable,
            Mode::Prefer => SslMode::Prefer,
            Mode::Require | Mode::VerifyCa | Mode::VerifyFull => SslMode::Require,
        }
    }
}

/// The TLS settings of a connection string, and the string without them.
#[derive(Debug)]
pub(crate) struct Settings {
    /// The connection string without `sslmode` and `sslrootcert`, for tokio-postgres to parse.
    pub(crate) rest: String,
    pub(crate) mode: Mode,
    /// `sslrootcert`: a PEM file, or `system`.
    pub(crate) root_cert: Option<String>,
}

impl Settings {
    /// Takes `sslmode` and `sslrootcert` out of `url`: a `postgres://` URL (query parameters) or
    /// a `key=value` string.
    pub(crate) fn take(url: &str) -> Result<Settings, StoreError> {
        let mut mode = None;
        let mut root_cert = None;
        let mut take = |key: &str, value: String| -> Result<bool, StoreError> {
            match key {
                "sslmode" => mode = Some(Mode::parse(&value)?),
                "sslrootcert" => root_cert = Some(value),
                _ => return Ok(false),
            }
            Ok(true)
        };
        let rest = if url.starts_with("postgres://") || url.starts_with("postgresql://") {
            match url.split_once('?') {
                None => url.to_string(),
                Some((base, query)) => {
                    let mut kept = Vec::new();
                    for pair in query.split('&').filter(|p| !p.is_empty()) {
                        let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
                        if !take(key, percent_decode(value)?)? {
                            kept.push(pair);
                        }
                    }
                    if kept.is_empty() {
                        base.to_string()
                    } else {
                        format!("{base}?{}", kept.join("&"))
                    }
                }
            }
        } else {
            let mut kept = Vec::new();
            for word in url.split_whitespace() {
                let taken = match word.split_once('=') {
                    Some((key, value)) => take(key.trim(), value.trim_matches('\'').to_string())?,
                    None => false,
                };
                if !taken {
                    kept.push(word);
                }
            }
            kept.join(" ")
        };
        let mode = mode.unwrap_or(Mode::Prefer);
        if matches!(mode, Mode::VerifyCa | Mode::VerifyFull) && root_cert.is_none() {
            return Err(invalid(format!(
                "sslmode={} needs sslrootcert: a PEM file of the roots to trust, or `system`",
                if mode == Mode::VerifyCa {
                    "verify-ca"
                } else {
                    "verify-full"
                }
            )));
        }
        Ok(Settings {
            rest,
            mode,
            root_cert,
        })
    }

    /// Sets `config`'s TLS mode; the connector its connections use.
    pub(crate) fn apply(
        &self,
        config: &mut tokio_postgres::Config,
    ) -> Result<MakeRustlsConnect, StoreError> {
        config.ssl_mode(self.mode.ssl_mode());
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let builder = ClientConfig::builder_with_provider(provider.clone())
            .with_safe_default_protocol_versions()
            .map_err(|e| invalid(format!("cannot set up TLS: {e}")))?;
        let roots = self.root_cert.as_deref().map(roots).transpose()?;
        let verifier: Arc<dyn ServerCertVerifier> = match (self.mode, roots) {
            (Mode::VerifyFull, Some(roots)) => webpki(roots, &provider)?,
            (Mode::VerifyCa | Mode::Require, Some(roots)) => Arc::new(Lenient {
                chain: Some(webpki(roots, &provider)?),
                algorithms: provider.signature_verification_algorithms,
            }),
            // `prefer` and `require` without roots: encrypted, not authenticated (as libpq).
            _ => Arc::new(Lenient {
                chain: None,
                algorithms: provider.signature_verification_algorithms,
            }),
        };
        let client = builder
            .dangerous()
            .with_custom_certificate_verifier(verifier)
            .with_no_client_auth();
        Ok(MakeRustlsConnect::new(client))
    }
}

fn invalid(reason: String) -> StoreError {
    StoreError::Invalid {
        what: "postgres URL",
        reason,
    }
}

/// `%XX` escapes of a URL query value decoded.
fn percent_decode(value: &str) -> Result<String, StoreError> {
    let bytes = value.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = value
                .get(i + 1..i + 3)
                .and_then(|h| u8::from_str_radix(h, 16).ok())
                .ok_or_else(|| invalid(format!("bad %-escape in {value:?}")))?;
            out.push(hex);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out).map_err(|_| invalid(format!("{value:?} is not UTF-8 once decoded")))
}

/// The roots `sslrootcert` names.
fn roots(root_cert: &str) -> Result<RootCertStore, StoreError> {
    let mut store = RootCertStore::empty();
    if root_cert == "system" {
        let found = rustls_native_certs::load_native_certs();
        for cert in found.certs {
            // A system root rustls cannot parse is skipped, as every TLS client does.
            let _ = store.add(cert);
        }
        if store.is_empty() {
            return Err(invalid(
                "sslrootcert=system: no root certificate found on this system".to_string(),
            ));
        }
        return Ok(store);
    }
    let certs = CertificateDer::pem_file_iter(root_cert)
        .map_err(|e| invalid(format!("sslrootcert {root_cert:?}: {e}")))?;
    for cert in certs {
        let cert = cert.map_err(|e| invalid(format!("sslrootcert {root_cert:?}: {e}")))?;
        store
            .add(cert)
            .map_err(|e| invalid(format!("sslrootcert {root_cert:?}: {e}")))?;
    }
    if store.is_empty() {
        return Err(invalid(format!(
            "sslrootcert {root_cert:?} holds no PEM certificate"
        )));
    }
    Ok(store)
}

fn webpki(
    roots: RootCertStore,
    provider: &Arc<CryptoProvider>,
) -> Result<Arc<WebPkiServerVerifier>, StoreError> {
    WebPkiServerVerifier::builder_with_provider(Arc::new(roots), provider.clone())
        .build()
        .map_err(|e| invalid(format!("cannot use the roots of sslrootcert: {e}")))
}

/// The verifier of the modes that do not check everything (`verify-full` uses webpki's as it
/// is). With `chain` (`verify-ca`, `require` with roots) the certificate must lead to a trusted
/// root, but the name on it is not compared with the host (a server reached by an address its
/// certificate does not name); without (`prefer`, `require`) who issued it is not checked. Either
/// way the server proves it holds the certificate's key: the handshake's signature is checked.
#[derive(Debug)]
struct Lenient {
    chain: Option<Arc<WebPkiServerVerifier>>,
    algorithms: WebPkiSupportedAlgorithms,
}

impl ServerCertVerifier for Lenient {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp_response: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        let Some(chain) = &self.chain else {
            return Ok(ServerCertVerified::assertion());
        };
        match chain.verify_server_cert(end_entity, intermediates, server_name, ocsp_response, now) {
            Err(rustls::Error::InvalidCertificate(
                CertificateError::NotValidForName | CertificateError::NotValidForNameContext { .. },
            )) => Ok(ServerCertVerified::assertion()),
            other => other,
        }
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(message, cert, dss, &self.algorithms)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(message, cert, dss, &self.algorithms)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.algorithms.supported_schemes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sslmode_and_sslrootcert_are_taken_out_of_urls_and_key_value_strings() {
        let s = Settings::take(
            "postgres://u@db:5432/test?application_name=x&sslmode=verify-full&sslrootcert=%2Ftmp%2Fca.pem",
        )
        .unwrap();
        assert_eq!(s.rest, "postgres://u@db:5432/test?application_name=x");
        assert_eq!(s.mode, Mode::VerifyFull);
        assert_eq!(s.root_cert.as_deref(), Some("/tmp/ca.pem"));

        let s = Settings::take("postgres://u@db/test?sslmode=require").unwrap();
        assert_eq!(
            (s.rest.as_str(), s.mode),
            ("postgres://u@db/test", Mode::Require)
        );
        let s = Settings::take("postgres://u@db/test").unwrap();
        assert_eq!(s.mode, Mode::Prefer, "libpq's default");

        let s = Settings::take("host=db user=u sslmode=disable dbname=test").unwrap();
        assert_eq!(
            (s.rest.as_str(), s.mode),
            ("host=db user=u dbname=test", Mode::Disable)
        );
    }

    #[test]
    fn a_bad_sslmode_or_a_verifying_mode_without_roots_is_refused_by_name() {
        let e = Settings::take("postgres://db/test?sslmode=verify")
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("sslmode \"verify\"") && e.contains("verify-full"),
            "{e}"
        );
        let e = Settings::take("postgres://db/test?sslmode=verify-ca")
            .unwrap_err()
            .to_string();
        assert!(e.contains("needs sslrootcert"), "{e}");
        let s =
            Settings::take("postgres://db/test?sslmode=verify-full&sslrootcert=/nonexistent.pem")
                .unwrap();
        let e = s
            .apply(&mut tokio_postgres::Config::new())
            .err()
            .unwrap()
            .to_string();
        assert!(e.contains("/nonexistent.pem"), "{e}");
    }
}
