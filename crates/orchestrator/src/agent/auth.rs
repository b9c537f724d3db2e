//! Testbed credentials: one TLS certificate for the agents and one shared token.
//!
//! `pantheon node credentials --out DIR --host ADDR…` writes three files:
//!
//! | file | who needs it | what |
//! |---|---|---|
//! | `agent.pem` | agents and the orchestrator | self-signed certificate naming every agent address (the orchestrator trusts exactly it) |
//! | `agent.key` | agents | its private key (mode 0600) |
//! | `token` | agents and the orchestrator | 256-bit random token, hex (mode 0600) |
//!
//! Every gRPC call travels over TLS (rustls) and carries `authorization: Bearer <token>`; an
//! agent refuses, and logs, a call without it or with another token ([`TokenCheck`]).

use std::path::Path;

use anyhow::{bail, Context};
use tonic::metadata::{Ascii, MetadataValue};
use tonic::{Request, Status};

/// File names inside a credentials directory.
pub const CERT_FILE: &str = "agent.pem";
/// The agents' private key.
pub const KEY_FILE: &str = "agent.key";
/// The shared token.
pub const TOKEN_FILE: &str = "token";

/// A testbed's credentials (see the module docs).
#[derive(Clone)]
pub struct Credentials {
    /// PEM certificate of the agents.
    pub cert_pem: String,
    /// PEM private key (only agents need it; `None` when loaded without it).
    pub key_pem: Option<String>,
    /// The shared token (64 hex digits).
    pub token: String,
}

impl std::fmt::Debug for Credentials {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never print the secrets.
        f.debug_struct("Credentials")
            .field("key_pem", &self.key_pem.as_ref().map(|_| "…"))
            .finish_non_exhaustive()
    }
}

impl Credentials {
    /// New credentials: a self-signed certificate valid for `hosts` (IP addresses or DNS
    /// names; `localhost` and `127.0.0.1` are always added) and a random token from the OS.
    pub fn generate(hosts: &[String]) -> anyhow::Result<Credentials> {
        let mut names: Vec<String> = hosts.to_vec();
        for n in ["localhost", "127.0.0.1"] {
            if !names.iter().any(|h| h == n) {
                names.push(n.to_owned());
            }
        }
        let certified = rcgen::generate_simple_self_signed(names)
            .context("generate the agents' certificate")?;
        let mut bytes = [0u8; 32];
        std::fs::File::open("/dev/urandom")
            .and_then(|mut f| std::io::Read::read_exact(&mut f, &mut bytes))
            .context("read /dev/urandom for the token")?;
        Ok(Credentials {
            cert_pem: certified.cert.pem(),
            key_pem: Some(certified.signing_key.serialize_pem()),
            token: bytes.iter().map(|b| format!("{b:02x}")).collect(),
        })
    }

    /// Writes the three files into `dir` (created if missing); the key and token with mode
    /// 0600. Errors name the file.
    pub fn write(&self, dir: &Path) -> anyhow::Result<()> {
        use std::os::unix::fs::OpenOptionsExt;
        std::fs::create_dir_all(dir).with_context(|| format!("create {}", dir.display()))?;
        let put = |name: &str, text: &str, mode: u32| -> anyhow::Result<()> {
            let p = dir.join(name);
            let mut f = std::fs::OpenOptions::new()
                .write(true)
                .create(true)
                .truncate(true)
                .mode(mode)
                .open(&p)
                .with_context(|| format!("write {}", p.display()))?;
            std::io::Write::write_all(&mut f, text.as_bytes())
                .with_context(|| format!("write {}", p.display()))
        };
        put(CERT_FILE, &self.cert_pem, 0o644)?;
        if let Some(key) = &self.key_pem {
            put(KEY_FILE, key, 0o600)?;
        }
        put(TOKEN_FILE, &format!("{}\n", self.token), 0o600)
    }

    /// Reads credentials from `dir`; the key only if `with_key` (an agent). Errors name the
    /// missing or malformed file and say how to make one.
    pub fn load(dir: &Path, with_key: bool) -> anyhow::Result<Credentials> {
        let read = |name: &str| -> anyhow::Result<String> {
            let p = dir.join(name);
            std::fs::read_to_string(&p).with_context(|| {
                format!(
                    "read {} (make credentials with `pantheon node credentials --out {} --host \
                     ADDR…`)",
                    p.display(),
                    dir.display()
                )
            })
        };
        let token = read(TOKEN_FILE)?.trim().to_owned();
        if token.len() < 16 || !token.chars().all(|c| c.is_ascii_graphic()) {
            bail!(
                "{}: the token must be at least 16 printable characters",
                dir.join(TOKEN_FILE).display()
            );
        }
        Ok(Credentials {
            cert_pem: read(CERT_FILE)?,
            key_pem: if with_key {
                Some(read(KEY_FILE)?)
            } else {
                None
            },
            token,
        })
    }

    /// The metadata value every call carries: `Bearer <token>`.
    pub fn bearer(&self) -> MetadataValue<Ascii> {
        format!("Bearer {}", self.token)
            .parse()
            .expect("a printable ASCII token is valid metadata")
    }
}

/// The agent's check of every call: the `authorization` metadata must be `Bearer <token>`.
/// Refusals are logged with the caller's address and answered with UNAUTHENTICATED.
#[derive(Clone)]
pub struct TokenCheck {
    expected: Vec<u8>,
}

impl TokenCheck {
    /// Checks calls against `credentials`' token.
    pub fn new(credentials: &Credentials) -> TokenCheck {
        TokenCheck {
            expected: credentials.bearer().as_bytes().to_vec(),
        }
    }

    /// `Ok` when `presented` is the expected `Bearer <token>`; compared in constant time.
    pub fn accepts(&self, presented: Option<&[u8]>) -> bool {
        let Some(p) = presented else { return false };
        p.len() == self.expected.len()
            && p.iter()
                .zip(&self.expected)
                .fold(0u8, |acc, (a, b)| acc | (a ^ b))
                == 0
    }
}

impl tonic::service::Interceptor for TokenCheck {
    fn call(&mut self, request: Request<()>) -> Result<Request<()>, Status> {
        let presented = request
            .metadata()
            .get("authorization")
            .map(|v| v.as_bytes());
        if self.accepts(presented) {
            return Ok(request);
        }
        let who = request
            .remote_addr()
            .map_or("an unknown address".to_owned(), |a| a.to_string());
        let why = if presented.is_none() {
            "no token"
        } else {
            "a wrong token"
        };
        super::log(&format!("refused a call from {who}: {why}"));
        Err(Status::unauthenticated(format!(
            "this agent needs `authorization: Bearer <token>` ({why} given)"
        )))
    }
}

/// Adds the token to every call of a client (no `authorization` header at all when the
/// credentials' token is empty).
#[derive(Clone)]
pub struct TokenHeader {
    value: Option<MetadataValue<Ascii>>,
}

impl TokenHeader {
    /// The header of `credentials`' token.
    pub fn new(credentials: &Credentials) -> TokenHeader {
        TokenHeader {
            value: (!credentials.token.is_empty()).then(|| credentials.bearer()),
        }
    }
}

impl tonic::service::Interceptor for TokenHeader {
    fn call(&mut self, mut request: Request<()>) -> Result<Request<()>, Status> {
        if let Some(v) = &self.value {
            request.metadata_mut().insert("authorization", v.clone());
        }
        Ok(request)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn credentials_round_trip_and_the_token_check_is_exact() {
        let dir = std::env::temp_dir().join(format!("pt-creds-{}", std::process::id()));
        let c = Credentials::generate(&["10.0.0.1".into()]).unwrap();
        assert_eq!(c.token.len(), 64);
        assert!(c.cert_pem.starts_with("-----BEGIN CERTIFICATE-----"));
        c.write(&dir).unwrap();
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(dir.join(KEY_FILE))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600);
        let back = Credentials::load(&dir, true).unwrap();
        assert_eq!(back.token, c.token);
        assert_eq!(back.key_pem, c.key_pem);
        let check = TokenCheck::new(&back);
        let good = format!("Bearer {}", c.token);
        assert!(check.accepts(Some(good.as_bytes())));
        let mut bad = good.clone().into_bytes();
        *bad.last_mut().unwrap() ^= 1;
        assert!(!check.accepts(Some(&bad)));
        assert!(!check.accepts(Some(b"Bearer ")));
        assert!(!check.accepts(None));
        std::fs::remove_file(dir.join(TOKEN_FILE)).unwrap();
        let e = Credentials::load(&dir, false).unwrap_err().to_string();
        assert!(
            e.contains("token") && e.contains("pantheon node credentials"),
            "{e}"
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
