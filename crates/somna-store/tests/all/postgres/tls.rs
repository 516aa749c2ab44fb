//! TLS to Postgres, against the machine's server: the test makes a CA and a server certificate
//! for `localhost` (rcgen), points the server at them (`ALTER SYSTEM` + reload; undone at the end),
//! and connects as each `sslmode` says. The files go into the server's data directory, so a
//! server restarted after an interrupted run still finds what its config names.
//!
//! Needs a superuser and the server's data directory on this machine, writable (CI runs as root
//! beside the server); elsewhere the test reports the skip.

use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use super::admin::Admin;
use crate::common::*;
use rcgen::{BasicConstraints, CertificateParams, IsCa, Issuer, KeyPair};
use somna_store::{PostgresOptions, Store};

/// A CA, a certificate it issued for `localhost` (not for 127.0.0.1), and another CA.
struct Certs {
    ca_pem: String,
    server_pem: String,
    server_key_pem: String,
    stranger_ca_pem: String,
}

fn make_certs() -> Certs {
    let ca = || {
        let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        let key = KeyPair::generate().unwrap();
        let cert = params.self_signed(&key).unwrap();
        (cert, Issuer::new(params, key))
    };
    let (ca_cert, issuer) = ca();
    let (stranger, _) = ca();
    let server_key = KeyPair::generate().unwrap();
    let server = CertificateParams::new(vec!["localhost".to_string()])
        .unwrap()
        .signed_by(&server_key, &issuer)
        .unwrap();
    Certs {
        ca_pem: ca_cert.pem(),
        server_pem: server.pem(),
        server_key_pem: server_key.serialize_pem(),
        stranger_ca_pem: stranger.pem(),
    }
}

/// The server's TLS files replaced by the test's; put back when dropped.
struct ServerTls<'a> {
    admin: &'a Admin,
}

impl<'a> ServerTls<'a> {
    /// Installs `certs` on the server, or says why it cannot (the skip's reason).
    fn install(admin: &'a Admin, certs: &Certs) -> Result<ServerTls<'a>, String> {
        if admin.value("SELECT current_setting('is_superuser')") != "on" {
            return Err("the tests' Postgres user is not a superuser".into());
        }
        let data = PathBuf::from(admin.value("SHOW data_directory"));
        let owner = std::fs::metadata(&data).map_err(|e| {
            format!(
                "the server's data directory {} is not on this machine: {e}",
                data.display()
            )
        })?;
        let write = |name: &str, text: &str, mode: u32| -> std::io::Result<PathBuf> {
            let path = data.join(name);
            std::fs::write(&path, text)?;
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode))?;
            std::os::unix::fs::chown(&path, Some(owner.uid()), Some(owner.gid()))?;
            Ok(path)
        };
        let files = write("somna-test-server.crt", &certs.server_pem, 0o644).and_then(|crt| {
            Ok((
                crt,
                write("somna-test-server.key", &certs.server_key_pem, 0o600)?,
            ))
        });
        let (crt, key) = files.map_err(|e| {
            format!(
                "cannot give the server a certificate in {}: {e}",
                data.display()
            )
        })?;
        admin.run(&[
            &format!("ALTER SYSTEM SET ssl_cert_file = '{}'", crt.display()) as &str,
            &format!("ALTER SYSTEM SET ssl_key_file = '{}'", key.display()),
            "ALTER SYSTEM SET ssl = on",
            "SELECT pg_reload_conf()",
        ]);
        Ok(ServerTls { admin })
    }
}

impl Drop for ServerTls<'_> {
    fn drop(&mut self) {
        self.admin.run(&[
            "ALTER SYSTEM RESET ssl_cert_file" as &str,
            "ALTER SYSTEM RESET ssl_key_file",
            "ALTER SYSTEM RESET ssl",
            "SELECT pg_reload_conf()",
        ]);
    }
}

/// `url` (the tests' server) with `host` and the query `params`.
fn url_to(url: &str, host: &str, params: &str) -> String {
    let config: tokio_postgres::Config = url.parse().unwrap();
    let user = config.get_user().unwrap_or("postgres");
    let password = config
        .get_password()
        .map(|p| format!(":{}", String::from_utf8_lossy(p)))
        .unwrap_or_default();
    let port = config.get_ports().first().copied().unwrap_or(5432);
    let db = config.get_dbname().unwrap_or("postgres");
    format!("postgres://{user}{password}@{host}:{port}/{db}?{params}")
}

fn write_pem(dir: &Path, name: &str, pem: &str) -> String {
    let path = dir.join(name);
    std::fs::write(&path, pem).unwrap();
    path.display().to_string()
}

/// Opens a store at `url` (a fresh schema), writes and reads an agent; the store and its schema
/// name, or the open's error.
fn open(url: &str, what: &str) -> Result<(Store, String), String> {
    let schema = unique_schema(what);
    let options = PostgresOptions {
        schema: schema.clone(),
        pool_size: 1,
    };
    let store = Store::open_postgres(url, options).map_err(|e| e.to_string())?;
    let id = agent("npc");
    store.create_agent(&id, NOW).unwrap();
    assert!(store.agent(&id).unwrap().is_some());
    Ok((store, schema))
}

#[test]
fn connections_use_tls_as_sslmode_says() {
    let Some(url) = pg_url() else { return };
    let admin = Admin::connect(&url);
    let certs = make_certs();
    let _server = match ServerTls::install(&admin, &certs) {
        Ok(installed) => installed,
        Err(why) => {
            somna_testkit::skip(&format!("cannot configure the server's TLS: {why}"));
            return;
        }
    };
    let dir = tempfile::tempdir().unwrap();
    let ca = write_pem(dir.path(), "ca.pem", &certs.ca_pem);
    let stranger = write_pem(dir.path(), "stranger.pem", &certs.stranger_ca_pem);
    let full = url_to(
        &url,
        "localhost",
        &format!("sslmode=verify-full&sslrootcert={ca}"),
    );

    // The reload is asynchronous: wait until the server shows the test's certificate.
    let deadline = Instant::now() + Duration::from_secs(15);
    let (store, schema) = loop {
        match open(&full, "tls_full") {
            Ok(opened) => break opened,
            Err(e) => {
                assert!(
                    Instant::now() < deadline,
                    "verify-full never connected: {e}"
                );
                std::thread::sleep(Duration::from_millis(100));
            }
        }
    };
    // The pool's sessions and the lock's are encrypted.
    assert_eq!(admin.encrypted(&format!("somna:{schema}")), Some(true));
    assert_eq!(admin.encrypted(&format!("somna-lock:{schema}")), Some(true));
    drop(store);
    let _ = Store::temporary_postgres_in(&full, &schema).unwrap();

    // verify-ca checks the chain but not the name: 127.0.0.1 is not on the certificate.
    let by_address = |params: String| url_to(&url, "127.0.0.1", &params);
    let e = open(
        &by_address(format!("sslmode=verify-full&sslrootcert={ca}")),
        "tls_name",
    )
    .expect_err("verify-full accepted a certificate for another name");
    assert!(
        e.contains("cannot connect") && e.contains("127.0.0.1"),
        "{e}"
    );
    let (store, schema) = open(
        &by_address(format!("sslmode=verify-ca&sslrootcert={ca}")),
        "tls_ca",
    )
    .unwrap();
    assert_eq!(admin.encrypted(&format!("somna:{schema}")), Some(true));
    drop(store);
    let _ = Store::temporary_postgres_in(&full, &schema).unwrap();

    // A certificate from a CA the client does not trust is refused, whatever the name.
    for mode in ["verify-ca", "verify-full", "require"] {
        let e = open(
            &url_to(
                &url,
                "localhost",
                &format!("sslmode={mode}&sslrootcert={stranger}"),
            ),
            "tls_stranger",
        )
        .err()
        .unwrap_or_else(|| panic!("sslmode={mode} trusted a stranger's certificate"));
        assert!(e.contains("cannot connect"), "{mode}: {e}");
    }

    // require without roots: encrypted, unauthenticated; disable: plain text.
    for (params, encrypted) in [("sslmode=require", true), ("sslmode=disable", false)] {
        let (store, schema) = open(&by_address(params.to_string()), "tls_mode").unwrap();
        assert_eq!(
            admin.encrypted(&format!("somna:{schema}")),
            Some(encrypted),
            "{params}"
        );
        drop(store);
        let _ = Store::temporary_postgres_in(&full, &schema).unwrap();
    }
}
