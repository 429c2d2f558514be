//! The keys a fleet repo's commits must be signed with: SSH public keys in OpenSSH's
//! `allowed_signers` format and OpenPGP public keys (ASCII-armored), read from a file or from
//! the entries of a Secret.
//!
//! One text may hold both: armored `PUBLIC KEY BLOCK`s are OpenPGP keys, every other line that is
//! neither blank nor a `#` comment is an `allowed_signers` line. Anything that is not a key is an
//! error naming where it is, so a typo never quietly trusts nothing.

use std::fmt;
use std::path::Path;

use pgp::composed::{Deserializable, SignedPublicKey};
use pgp::types::KeyDetails;
use ssh_key::{HashAlg, PublicKey};

/// The namespace git signs commits and tags in (`ssh-keygen -Y sign -n git`).
pub(super) const GIT_NAMESPACE: &str = "git";

const PGP_BEGIN: &str = "-----BEGIN PGP PUBLIC KEY BLOCK-----";
const PGP_END: &str = "-----END PGP PUBLIC KEY BLOCK-----";

/// A key file or Secret that could not be read as trusted keys.
#[derive(Debug, thiserror::Error)]
#[error("{origin}{}: {message}", line.map(|line| format!(":{line}")).unwrap_or_default())]
pub struct KeysError {
    /// The file, or `Secret NAMESPACE/NAME key KEY`.
    pub origin: String,
    /// The line the problem starts on (1-based).
    pub line: Option<usize>,
    pub message: String,
}

/// One line of an `allowed_signers` file.
#[derive(Clone, Debug)]
pub(super) struct AllowedSigner {
    /// The principals as written (comma-separated), for people.
    pub principals: String,
    pub key: PublicKey,
}

/// The keys a signature must verify with.
#[derive(Clone, Debug, Default)]
pub struct TrustedKeys {
    pub(super) ssh: Vec<AllowedSigner>,
    pub(super) pgp: Vec<SignedPublicKey>,
}

impl TrustedKeys {
    /// Reads the keys of a file.
    pub fn read_file(path: &Path) -> Result<TrustedKeys, KeysError> {
        let origin = path.display().to_string();
        let text = std::fs::read_to_string(path).map_err(|err| KeysError {
            origin: origin.clone(),
            line: None,
            message: format!("cannot read the keys: {err}"),
        })?;
        let keys = TrustedKeys::parse(&text, &origin)?;
        keys.require_some(&origin)
    }

    /// Reads the keys of every entry of a Secret's data (`origin` names the Secret).
    pub fn from_secret_data<'a>(
        origin: &str,
        entries: impl IntoIterator<Item = (&'a str, &'a [u8])>,
    ) -> Result<TrustedKeys, KeysError> {
        let mut keys = TrustedKeys::default();
        for (name, value) in entries {
            let at = format!("{origin} key {name}");
            let text = std::str::from_utf8(value).map_err(|_| KeysError {
                origin: at.clone(),
                line: None,
                message: "not UTF-8 text (allowed_signers lines or armored OpenPGP keys)".into(),
            })?;
            let found = TrustedKeys::parse(text, &at)?;
            keys.ssh.extend(found.ssh);
            keys.pgp.extend(found.pgp);
        }
        keys.require_some(origin)
    }

    /// Parses `allowed_signers` lines and armored OpenPGP public keys, in any mix.
    pub fn parse(text: &str, origin: &str) -> Result<TrustedKeys, KeysError> {
        let error = |line: usize, message: String| KeysError {
            origin: origin.to_string(),
            line: Some(line),
            message,
        };
        let mut keys = TrustedKeys::default();
        let mut lines = text
            .lines()
            .enumerate()
            .map(|(index, line)| (index + 1, line));
        while let Some((number, line)) = lines.next() {
            let line = line.trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            if line == PGP_BEGIN {
                let mut block = vec![line];
                loop {
                    match lines.next() {
                        Some((_, line)) if line.trim() == PGP_END => {
                            block.push(line.trim());
                            break;
                        }
                        Some((_, line)) => block.push(line.trim()),
                        None => {
                            return Err(error(number, format!("no {PGP_END} after this line")));
                        }
                    }
                }
                keys.pgp.extend(
                    parse_pgp_block(&block.join("\n")).map_err(|message| error(number, message))?,
                );
            } else {
                keys.ssh
                    .push(parse_allowed_signer(line).map_err(|message| error(number, message))?);
            }
        }
        Ok(keys)
    }

    fn require_some(self, origin: &str) -> Result<TrustedKeys, KeysError> {
        if self.ssh.is_empty() && self.pgp.is_empty() {
            return Err(KeysError {
                origin: origin.to_string(),
                line: None,
                message: "holds no keys (allowed_signers lines or armored OpenPGP public keys)"
                    .into(),
            });
        }
        Ok(self)
    }
}

/// `principals [options] keytype base64 [comment]`, as `ssh-keygen(1)` describes it.
fn parse_allowed_signer(line: &str) -> Result<AllowedSigner, String> {
    let (principals, rest) = line
        .split_once(char::is_whitespace)
        .ok_or("an allowed_signers line is `principals [options] keytype key`")?;
    let rest = rest.trim_start();
    let key = match PublicKey::from_openssh(rest) {
        Ok(key) => key,
        Err(_) => {
            let (options, key) = split_options(rest);
            check_options(options)?;
            PublicKey::from_openssh(key.trim_start()).map_err(|err| {
                format!("not an SSH public key after the principals and options: {err}")
            })?
        }
    };
    Ok(AllowedSigner {
        principals: principals.to_string(),
        key,
    })
}

/// The options field (up to the first blank outside double quotes) and what follows it.
fn split_options(rest: &str) -> (&str, &str) {
    let end = unquoted(rest, char::is_whitespace).first().copied();
    rest.split_at(end.unwrap_or(rest.len()))
}

/// Where `separator` occurs outside double quotes.
fn unquoted(text: &str, separator: impl Fn(char) -> bool) -> Vec<usize> {
    let mut quoted = false;
    let mut found = Vec::new();
    for (index, c) in text.char_indices() {
        if c == '"' {
            quoted = !quoted;
        } else if !quoted && separator(c) {
            found.push(index);
        }
    }
    found
}

/// Only `namespaces=` is understood, and it must admit git's; anything else would trust a key
/// differently from what the file says.
fn check_options(options: &str) -> Result<(), String> {
    let mut start = 0;
    let mut parts = Vec::new();
    for comma in unquoted(options, |c| c == ',') {
        parts.push(&options[start..comma]);
        start = comma + 1;
    }
    parts.push(&options[start..]);
    for option in parts.into_iter().filter(|o| !o.is_empty()) {
        let (name, value) = option.split_once('=').unwrap_or((option, ""));
        match name.to_ascii_lowercase().as_str() {
            "namespaces" => {
                let value = value.trim_matches('"');
                if !value.split(',').any(|ns| ns == GIT_NAMESPACE || ns == "*") {
                    return Err(format!(
                        "namespaces={value:?} does not admit git's namespace {GIT_NAMESPACE:?}"
                    ));
                }
            }
            _ => {
                return Err(format!(
                    "option {name:?} is not supported (only namespaces=); remove it or the line"
                ));
            }
        }
    }
    Ok(())
}

fn parse_pgp_block(block: &str) -> Result<Vec<SignedPublicKey>, String> {
    let (keys, _) = SignedPublicKey::from_string_many(block)
        .map_err(|err| format!("not an OpenPGP public key block: {err}"))?;
    let mut parsed = Vec::new();
    for key in keys {
        let key = key.map_err(|err| format!("not an OpenPGP public key: {err}"))?;
        key.verify_bindings().map_err(|err| {
            format!(
                "OpenPGP key {:X} has invalid self-signatures: {err}",
                key.fingerprint()
            )
        })?;
        parsed.push(key);
    }
    if parsed.is_empty() {
        return Err("the OpenPGP public key block holds no key".to_string());
    }
    Ok(parsed)
}

/// A key that made a signature, as people name it.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Signer {
    /// `ssh` or `openpgp`.
    pub format: String,
    /// `SHA256:…` for SSH, the hex fingerprint (or key ID) for OpenPGP.
    pub key: String,
    /// The principals of the allowed_signers line or the key's first user ID; empty when the key
    /// is not trusted.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub identity: String,
}

impl Signer {
    pub(super) fn ssh(key: &ssh_key::public::KeyData, principals: Option<&str>) -> Signer {
        Signer {
            format: "ssh".into(),
            key: key.fingerprint(HashAlg::Sha256).to_string(),
            identity: principals.unwrap_or_default().to_string(),
        }
    }

    pub(super) fn pgp(key: String, user: Option<&SignedPublicKey>) -> Signer {
        let identity = user
            .and_then(|key| key.details.users.first())
            .map(|user| String::from_utf8_lossy(user.id.id()).into_owned())
            .unwrap_or_default();
        Signer {
            format: "openpgp".into(),
            key,
            identity,
        }
    }
}

impl fmt::Display for Signer {
    /// `SSH key SHA256:… (alice@example.com)`, `OpenPGP key 4F1A… (Alice <alice@example.com>)`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let format = if self.format == "ssh" {
            "SSH"
        } else {
            "OpenPGP"
        };
        write!(f, "{format} key {}", self.key)?;
        if !self.identity.is_empty() {
            write!(f, " ({})", self.identity)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const ED25519: &str =
        "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIHXgTclxbAlTbqZMQ8YFDPwaHsBlnjBSw6SswwT6d+pG";

    #[test]
    fn allowed_signers_lines_are_read_with_or_without_options() {
        let text = format!(
            "# release managers\n\nalice@example.com {ED25519} laptop\nbob@example.com,ci namespaces=\"git,file\" {ED25519}\n"
        );
        let keys = TrustedKeys::parse(&text, "keys").unwrap();
        assert_eq!(keys.ssh.len(), 2);
        assert_eq!(keys.ssh[1].principals, "bob@example.com,ci");
        assert!(keys.pgp.is_empty());
    }

    #[test]
    fn what_is_not_a_key_is_an_error_naming_its_line() {
        let err = TrustedKeys::parse(&format!("alice {ED25519}\nbob ssh-ed25519 AAAA"), "keys")
            .unwrap_err();
        assert_eq!(err.line, Some(2), "{err}");
        let err =
            TrustedKeys::parse(&format!("alice cert-authority {ED25519}"), "keys").unwrap_err();
        assert!(err.to_string().contains("cert-authority"), "{err}");
        let err = TrustedKeys::parse(&format!("alice namespaces=\"file\" {ED25519}"), "keys")
            .unwrap_err();
        assert!(err.to_string().contains("does not admit"), "{err}");
        let err = TrustedKeys::parse(&format!("{PGP_BEGIN}\n\nAAAA\n"), "keys").unwrap_err();
        assert!(err.to_string().starts_with("keys:1: no -----END"), "{err}");
        let err = TrustedKeys::from_secret_data("Secret a/b", [("x", b"# nothing\n".as_slice())])
            .unwrap_err();
        assert!(err.to_string().contains("holds no keys"), "{err}");
    }
}
