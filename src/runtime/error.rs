//! A failed Kubernetes call, said once for every component: which object, what was attempted,
//! and the [`Category`] of the failure that metrics label and Events name as their reason.
//!
//! Component errors keep their own variants and wrap this one
//! (`#[error(transparent)] Kube(#[from] KubeError)`), so `?` turns a failed call into theirs.

use std::fmt;

/// A Kubernetes call that failed: `{object}: cannot {action}: {source}`.
#[derive(Debug, thiserror::Error)]
#[error("{object}: cannot {action}: {source}")]
pub struct KubeError {
    /// The object the call concerned, as a person names it (`Spoke spoke1`, `cluster spoke1`).
    pub object: String,
    /// What was attempted (`write status`, `create its ManagedCluster`).
    pub action: String,
    #[source]
    pub source: kube::Error,
}

impl KubeError {
    /// Wraps the error of a call that tried `action` on `object`, for `map_err`:
    /// `.map_err(KubeError::on(format!("Hub {name}"), "read"))?`.
    pub fn on(
        object: impl Into<String>,
        action: impl Into<String>,
    ) -> impl FnOnce(kube::Error) -> Self {
        let object = object.into();
        let action = action.into();
        move |source| KubeError {
            object,
            action,
            source,
        }
    }

    /// What kind of failure this is.
    pub fn category(&self) -> Category {
        Category::of(&self.source)
    }

    /// A write lost a race with another writer (409): the next attempt starts from a fresh
    /// read, which is optimistic concurrency working, not a failure worth a warning.
    pub fn is_conflict(&self) -> bool {
        self.category() == Category::Conflict
    }
}

/// What kind of failure a Kubernetes call met: a metric label and an Event reason, and what
/// tells an operator where to look.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Category {
    /// 409: another writer changed the object first (or it exists already).
    Conflict,
    /// 404: the object (or its kind) is not there.
    NotFound,
    /// 401: the credentials were not accepted.
    Unauthorized,
    /// 403: the identity may not do this (RBAC, admission).
    Forbidden,
    /// 400, 422: the server refused what was sent.
    Invalid,
    /// 408, 504, or a connection that timed out.
    Timeout,
    /// 429 or another 5xx: the server is there but could not serve.
    Unavailable,
    /// The server could not be reached or its answer not read.
    Unreachable,
    /// Any other answer of the server.
    Other,
}

impl Category {
    /// The category of a kube-rs error.
    pub fn of(err: &kube::Error) -> Self {
        match err {
            kube::Error::Api(status) => match status.code {
                409 => Category::Conflict,
                404 => Category::NotFound,
                401 => Category::Unauthorized,
                403 => Category::Forbidden,
                400 | 422 => Category::Invalid,
                408 | 504 => Category::Timeout,
                429 | 500..=599 => Category::Unavailable,
                _ => Category::Other,
            },
            other if timed_out(other) => Category::Timeout,
            _ => Category::Unreachable,
        }
    }

    /// Its name, as a metric label value and an Event reason.
    pub fn as_str(self) -> &'static str {
        match self {
            Category::Conflict => "Conflict",
            Category::NotFound => "NotFound",
            Category::Unauthorized => "Unauthorized",
            Category::Forbidden => "Forbidden",
            Category::Invalid => "Invalid",
            Category::Timeout => "Timeout",
            Category::Unavailable => "Unavailable",
            Category::Unreachable => "Unreachable",
            Category::Other => "Other",
        }
    }
}

impl fmt::Display for Category {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Whether an I/O timeout is somewhere in the error's chain (a connect or read that timed out).
fn timed_out(err: &(dyn std::error::Error + 'static)) -> bool {
    let mut cause = Some(err);
    while let Some(err) = cause {
        if err
            .downcast_ref::<std::io::Error>()
            .is_some_and(|io| io.kind() == std::io::ErrorKind::TimedOut)
        {
            return true;
        }
        cause = err.source();
    }
    false
}

/// Whether a call failed with 404 Not Found.
pub fn is_not_found(err: &kube::Error) -> bool {
    Category::of(err) == Category::NotFound
}

/// Whether a call failed with 403 Forbidden.
pub fn is_forbidden(err: &kube::Error) -> bool {
    Category::of(err) == Category::Forbidden
}

/// Whether a call failed with 409 Conflict (AlreadyExists on create).
pub fn is_conflict(err: &kube::Error) -> bool {
    Category::of(err) == Category::Conflict
}

/// A component's error as the error policy sees it: a failed Kubernetes call, or something
/// else.
pub trait Failure: std::error::Error {
    /// The Kubernetes call that failed, when that is what this is.
    fn kube(&self) -> Option<&KubeError>;

    /// Whether a write lost a race (see [`KubeError::is_conflict`]).
    fn is_conflict(&self) -> bool {
        self.kube().is_some_and(KubeError::is_conflict)
    }
}

impl Failure for KubeError {
    fn kube(&self) -> Option<&KubeError> {
        Some(self)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn api(code: u16) -> kube::Error {
        kube::Error::Api(Box::new(
            kube::core::Status::failure("refused", "Refused").with_code(code),
        ))
    }

    #[test]
    fn api_statuses_fall_in_the_category_an_operator_acts_on() {
        for (code, category) in [
            (409, Category::Conflict),
            (404, Category::NotFound),
            (401, Category::Unauthorized),
            (403, Category::Forbidden),
            (422, Category::Invalid),
            (400, Category::Invalid),
            (504, Category::Timeout),
            (503, Category::Unavailable),
            (429, Category::Unavailable),
            (410, Category::Other),
        ] {
            assert_eq!(Category::of(&api(code)), category, "{code}");
        }
    }

    #[test]
    fn a_call_that_never_got_an_answer_is_unreachable_or_timed_out() {
        let refused = std::io::Error::from(std::io::ErrorKind::ConnectionRefused);
        assert_eq!(
            Category::of(&kube::Error::Service(Box::new(refused))),
            Category::Unreachable
        );
        let timed_out = std::io::Error::from(std::io::ErrorKind::TimedOut);
        assert_eq!(
            Category::of(&kube::Error::Service(Box::new(timed_out))),
            Category::Timeout
        );
    }

    #[test]
    fn the_message_names_the_object_the_action_and_the_cause() {
        let err = KubeError::on("Spoke spoke1", "write status")(api(409));
        assert!(err.is_conflict());
        assert!(
            err.to_string()
                .starts_with("Spoke spoke1: cannot write status: "),
            "{err}"
        );
    }
}
