//! The lifetime of a spoke's bootstrap tokens (DESIGN §4.1), which the lifecycle reconciler
//! keeps: a token lives [`BOOTSTRAP_TOKEN_TTL`] (its Secret's `expiration`, which the API server
//! honours). While the spoke has not joined, its tokens are pushed out again when less than a
//! quarter of the lifetime is left; once it has joined and holds its certificate they are
//! deleted (renewals are requested by the certificate itself). A spoke that must bootstrap again
//! gets a new token. Pure: the tokens and the time in, what to do with each out.

use std::time::Duration;

use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::jiff::{SignedDuration, Timestamp};

use super::install::stored_token;
use crate::api::bootstrap_token::{BootstrapToken, token_expiration};

/// How long a bootstrap token is valid when issued or renewed: a day, so a token that leaks
/// before its spoke joins (or whose spoke never does) is useless a day after fleetform stops
/// renewing it.
pub const BOOTSTRAP_TOKEN_TTL: Duration = Duration::from_secs(24 * 60 * 60);

/// One thing to do with a spoke's bootstrap token Secret.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum TokenUpkeep {
    /// Set the Secret's `expiration` to this instant.
    Extend { secret: String, until: Timestamp },
    /// Delete the Secret.
    Delete { secret: String },
}

/// What to do with a spoke's bootstrap token Secrets at `now`. `bootstrapped`: the spoke has
/// joined and its agent holds a certificate it can keep using, so it needs no token any more
/// (renewals are requested by the certificate itself). Otherwise each token whose expiration is
/// less than a quarter of [`BOOTSTRAP_TOKEN_TTL`] away (or past, or unreadable, or missing) is
/// extended to a full lifetime from `now`.
pub fn token_upkeep(tokens: &[Secret], bootstrapped: bool, now: Timestamp) -> Vec<TokenUpkeep> {
    let name = |secret: &Secret| secret.metadata.name.clone().unwrap_or_default();
    if bootstrapped {
        return tokens
            .iter()
            .map(|token| TokenUpkeep::Delete {
                secret: name(token),
            })
            .collect();
    }
    let renew_within =
        SignedDuration::try_from(BOOTSTRAP_TOKEN_TTL / 4).unwrap_or(SignedDuration::MAX);
    let until = now
        .checked_add(BOOTSTRAP_TOKEN_TTL)
        .unwrap_or(Timestamp::MAX);
    tokens
        .iter()
        .filter(|token| {
            token_expiration(token).is_none_or(|expires| expires.duration_since(now) < renew_within)
        })
        .map(|token| TokenUpkeep::Extend {
            secret: name(token),
            until,
        })
        .collect()
}

/// A token of the spoke's `tokens` that has not expired at `now` (one without an expiration
/// never does), to put in a bootstrap kubeconfig; `None`: a new one is needed.
pub fn usable_token(tokens: &[Secret], now: Timestamp) -> Option<BootstrapToken> {
    tokens
        .iter()
        .filter(|token| token_expiration(token).is_none_or(|expires| expires > now))
        .find_map(stored_token)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::bootstrap_token::{BOOTSTRAP_TOKEN_EXPIRATION_KEY, token_secret};

    #[test]
    fn tokens_are_extended_in_their_last_quarter_and_deleted_once_the_spoke_holds_its_certificate()
    {
        let now = Timestamp::from_second(1_800_000_000).unwrap();
        let expiring_in = |hours: i64| {
            let expires = now.checked_add(SignedDuration::from_hours(hours)).unwrap();
            token_secret(
                "spoke-a",
                &format!("tok{hours:03}"),
                "0123456789abcdef",
                expires,
            )
        };
        let mut unlimited = expiring_in(24);
        unlimited
            .data
            .as_mut()
            .unwrap()
            .remove(BOOTSTRAP_TOKEN_EXPIRATION_KEY);
        let tokens = [
            expiring_in(24),
            expiring_in(7),
            expiring_in(5),
            expiring_in(-1),
            unlimited,
        ];
        let until = now.checked_add(BOOTSTRAP_TOKEN_TTL).unwrap();
        let extended: Vec<TokenUpkeep> = token_upkeep(&tokens, false, now);
        assert_eq!(
            extended,
            [
                "bootstrap-token-tok005",
                "bootstrap-token-tok-01",
                "bootstrap-token-tok024"
            ]
            .map(|secret| TokenUpkeep::Extend {
                secret: secret.to_string(),
                until
            })
        );
        let deleted = token_upkeep(&tokens[..2], true, now);
        assert_eq!(
            deleted,
            ["bootstrap-token-tok024", "bootstrap-token-tok007"].map(|secret| {
                TokenUpkeep::Delete {
                    secret: secret.to_string(),
                }
            })
        );
        let renewed = token_secret("spoke-a", "tok005", "0123456789abcdef", until);
        assert!(token_upkeep(&[renewed], false, now).is_empty());
    }

    #[test]
    fn a_token_that_has_not_expired_is_used_again_and_an_expired_one_never() {
        let now = Timestamp::from_second(1_800_000_000).unwrap();
        let token = |id: &str, hours: i64| {
            let expires = now.checked_add(SignedDuration::from_hours(hours)).unwrap();
            token_secret("spoke-a", id, "0123456789abcdef", expires)
        };
        let expired = token("old000", -1);
        let due_now = token("due000", 0);
        let current = token("new000", 1);
        assert_eq!(
            usable_token(&[expired.clone(), due_now.clone(), current], now).map(|t| t.id),
            Some("new000".to_string())
        );
        assert_eq!(usable_token(&[expired, due_now], now).map(|t| t.id), None);
        let mut unlimited = token("any000", -1);
        unlimited
            .data
            .as_mut()
            .unwrap()
            .remove(BOOTSTRAP_TOKEN_EXPIRATION_KEY);
        assert_eq!(
            usable_token(&[unlimited], now).map(|t| t.secret),
            Some("0123456789abcdef".to_string())
        );
    }
}
