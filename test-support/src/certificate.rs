//! Self-signed TLS files for a cluster, made with the `openssl` command.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use crate::process::{ServerUser, run};

/// Extensions of the server certificate: a leaf for `localhost` and `127.0.0.1`.
const SERVER_EXTENSIONS: &str = "\
basicConstraints = critical, CA:FALSE
keyUsage = critical, digitalSignature, keyEncipherment
extendedKeyUsage = serverAuth
subjectAltName = DNS:localhost, IP:127.0.0.1
";

/// The files a TLS cluster uses: a CA's certificate, and a server certificate and key it signed.
#[derive(Debug, Clone)]
pub(crate) struct TlsFiles {
    /// The CA certificate clients trust (`sslrootcert`).
    pub(crate) ca_cert: PathBuf,
    /// The server's certificate (`ssl_cert_file`).
    pub(crate) server_cert: PathBuf,
    /// The server's private key (`ssl_key_file`), readable by its owner alone.
    pub(crate) server_key: PathBuf,
}

impl TlsFiles {
    /// Makes a new CA (P-256, valid for two days) and a server certificate it signs, in `dir`.
    pub(crate) async fn generate(dir: &Path, user: ServerUser) -> Self {
        let files = Self {
            ca_cert: dir.join("ca.crt"),
            server_cert: dir.join("server.crt"),
            server_key: dir.join("server.key"),
        };
        let extensions = dir.join("server.ext");
        std::fs::write(&extensions, SERVER_EXTENSIONS)
            .unwrap_or_else(|err| panic!("cannot write {}: {err}", extensions.display()));
        user.own(&extensions);

        let openssl = |args: &[&str]| {
            let mut command = user.command("openssl", dir);
            command.args(args);
            command
        };
        let key = [
            "-newkey",
            "ec",
            "-pkeyopt",
            "ec_paramgen_curve:prime256v1",
            "-nodes",
        ];
        let mut ca = openssl(&["req", "-x509", "-days", "2", "-subj", "/CN=pgq test CA"]);
        ca.args(key)
            .args(["-keyout", "ca.key", "-out", "ca.crt"])
            .args([
                "-addext",
                "basicConstraints=critical,CA:TRUE",
                "-addext",
                "keyUsage=critical,keyCertSign,cRLSign",
            ]);
        run(ca, "openssl (the CA certificate)").await;
        let mut request = openssl(&["req", "-subj", "/CN=localhost"]);
        request
            .args(key)
            .args(["-keyout", "server.key", "-out", "server.csr"]);
        run(request, "openssl (the server key)").await;
        let sign = openssl(&[
            "x509",
            "-req",
            "-in",
            "server.csr",
            "-CA",
            "ca.crt",
            "-CAkey",
            "ca.key",
            "-CAcreateserial",
            "-days",
            "2",
            "-extfile",
            "server.ext",
            "-out",
            "server.crt",
        ]);
        run(sign, "openssl (signing the server certificate)").await;

        // PostgreSQL refuses a key that others may read.
        std::fs::set_permissions(&files.server_key, std::fs::Permissions::from_mode(0o600))
            .unwrap_or_else(|err| panic!("cannot restrict {}: {err}", files.server_key.display()));
        files
    }
}
