//! In-process admission: plugins the embedder registers with
//! [`crate::ControlPlaneBuilder::admission`] see every create, update (subresources included),
//! patch (server-side apply included, once the patch is applied) and delete that a client
//! sends, in order of registration, after defaulting and pruning and before the result is
//! validated and stored. A plugin may change the object or deny the request, as kube-apiserver's
//! admission webhooks do; a denial answers as a webhook's would, naming the plugin.
//!
//! Admission applies to every user, administrators and the trusted in-process transport
//! included, and to dry runs. The server's own controllers (garbage collection, namespace and
//! CRD cleanup, CSR signing) write without it.
//!
//! A plugin asks the [`Authorizer`] what RBAC allows, as a webhook asks kube-apiserver with a
//! SubjectAccessReview.

use std::sync::Arc;

use serde_json::Value;

use crate::auth::gate::PolicyCache;
use crate::auth::rbac::{Attributes, Target};
use crate::error::{ApiError, ApiResult};
use crate::storage::Store;
use crate::user::UserInfo;

/// What a request does to an object.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Operation {
    /// POST, or a server-side apply that creates the object.
    Create,
    /// PUT or PATCH, of the object or one of its subresources.
    Update,
    /// DELETE, one object or each object of a collection.
    Delete,
}

impl Operation {
    /// `CREATE`, `UPDATE` or `DELETE`, as in an AdmissionReview.
    pub fn as_str(self) -> &'static str {
        match self {
            Operation::Create => "CREATE",
            Operation::Update => "UPDATE",
            Operation::Delete => "DELETE",
        }
    }
}

/// One write, as a plugin sees it.
pub struct AdmissionRequest<'a> {
    pub operation: Operation,
    /// Who sends the request (after impersonation).
    pub user: &'a UserInfo,
    pub group: &'a str,
    /// The version the request is served at (the object is at this version).
    pub version: &'a str,
    /// The plural resource, e.g. `managedclusters`.
    pub resource: &'a str,
    /// `""` for the object itself; `status`, `approval`, `finalize` or `scale`.
    pub subresource: &'a str,
    pub kind: &'a str,
    /// `""` for cluster-scoped objects.
    pub namespace: &'a str,
    /// The object's name (generated already when the request gave `generateName`).
    pub name: &'a str,
    /// The object as it will be stored, whole even for a subresource write (create and
    /// update; `None` for delete). A plugin may change it, for example to set fields only the
    /// server may set; the result is validated again.
    pub object: Option<Value>,
    /// The stored object (update and delete; `None` for create).
    pub old_object: Option<&'a Value>,
    /// `dryRun=All`: nothing will be stored, but the request is admitted as if it were.
    pub dry_run: bool,
    /// What RBAC allows, for checks beyond the request's own verb.
    pub authorizer: &'a Authorizer<'a>,
}

/// Why a plugin refuses a request, and how the refusal is answered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DenialReason {
    /// 403 Forbidden (what a webhook's denial answers by default).
    Forbidden,
    /// 400 BadRequest.
    BadRequest,
    /// 422 Invalid.
    Invalid,
}

/// A plugin's refusal.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Denial {
    pub reason: DenialReason,
    /// Said to the client after `admission webhook "<plugin>" denied the request: `.
    pub message: String,
}

impl Denial {
    /// A 403 Forbidden refusal.
    pub fn forbidden(message: impl Into<String>) -> Self {
        Denial {
            reason: DenialReason::Forbidden,
            message: message.into(),
        }
    }
    /// A 400 BadRequest refusal.
    pub fn bad_request(message: impl Into<String>) -> Self {
        Denial {
            reason: DenialReason::BadRequest,
            message: message.into(),
        }
    }
    /// A 422 Invalid refusal.
    pub fn invalid(message: impl Into<String>) -> Self {
        Denial {
            reason: DenialReason::Invalid,
            message: message.into(),
        }
    }
}

/// An admission plugin. Plugins run on the request's task, outside any lock of the server, so
/// they may use the [`Authorizer`]; they should not block for long.
pub trait AdmissionPlugin: Send + Sync {
    /// The name a denial is reported under (a webhook's name in kube-apiserver).
    fn name(&self) -> &str;
    /// Admits `request` (possibly changing `request.object`) or refuses it.
    fn admit(&self, request: &mut AdmissionRequest<'_>) -> Result<(), Denial>;
}

/// A resource access to authorize, as a SubjectAccessReview's `resourceAttributes`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ResourceAccess<'a> {
    pub verb: &'a str,
    pub group: &'a str,
    pub resource: &'a str,
    pub subresource: &'a str,
    /// `""` for cluster scope.
    pub namespace: &'a str,
    /// `""` for any object.
    pub name: &'a str,
}

/// Answers what RBAC allows, exactly as requests are authorized (`system:masters` may do
/// anything); on a plain-HTTP control plane, which authorizes no request, RBAC is still what
/// answers.
pub struct Authorizer<'a> {
    store: &'a Store,
    policy: &'a PolicyCache,
}

impl Authorizer<'_> {
    /// Whether `user` may do `access`.
    pub fn allowed(&self, user: &UserInfo, access: &ResourceAccess<'_>) -> bool {
        let attributes = Attributes {
            user,
            verb: access.verb,
            target: Target::Resource {
                namespace: access.namespace,
                group: access.group,
                resource: access.resource,
                subresource: access.subresource,
                name: access.name,
            },
        };
        self.policy
            .check(self.store, |policy| policy.authorize(&attributes))
    }
}

/// The plugins of a control plane, in order, and the RBAC policy they consult.
#[derive(Clone, Default)]
pub struct Admission {
    plugins: Vec<Arc<dyn AdmissionPlugin>>,
    policy: Arc<PolicyCache>,
}

impl std::fmt::Debug for Admission {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let names: Vec<&str> = self.plugins.iter().map(|p| p.name()).collect();
        f.debug_struct("Admission")
            .field("plugins", &names)
            .finish_non_exhaustive()
    }
}

/// The request-independent part of an [`AdmissionRequest`].
pub(crate) struct Attempt<'a> {
    pub operation: Operation,
    pub user: &'a UserInfo,
    pub info: &'a crate::resource::ResourceInfo,
    pub subresource: &'a str,
    pub namespace: &'a str,
    pub name: &'a str,
    pub old_object: Option<&'a Value>,
    pub dry_run: bool,
}

impl Admission {
    /// Adds a plugin after those already registered.
    pub(crate) fn register(&mut self, plugin: Arc<dyn AdmissionPlugin>) {
        self.plugins.push(plugin);
    }

    /// The RBAC policy requests are authorized against (shared with the request path).
    pub(crate) fn policy(&self) -> &Arc<PolicyCache> {
        &self.policy
    }

    /// Whether any plugin is registered.
    pub(crate) fn is_empty(&self) -> bool {
        self.plugins.is_empty()
    }

    /// Runs every plugin on `object`; returns the object as they left it, or the first denial
    /// as kube-apiserver answers a webhook's.
    pub(crate) fn admit(
        &self,
        store: &Store,
        attempt: &Attempt<'_>,
        object: Option<Value>,
    ) -> ApiResult<Option<Value>> {
        if self.plugins.is_empty() {
            return Ok(object);
        }
        let authorizer = Authorizer {
            store,
            policy: &self.policy,
        };
        let mut request = AdmissionRequest {
            operation: attempt.operation,
            user: attempt.user,
            group: &attempt.info.group,
            version: &attempt.info.version,
            resource: &attempt.info.plural,
            subresource: attempt.subresource,
            kind: &attempt.info.kind,
            namespace: attempt.namespace,
            name: attempt.name,
            object,
            old_object: attempt.old_object,
            dry_run: attempt.dry_run,
            authorizer: &authorizer,
        };
        for plugin in &self.plugins {
            plugin.admit(&mut request).map_err(|denial| {
                let (code, reason) = match denial.reason {
                    DenialReason::Forbidden => (403, "Forbidden"),
                    DenialReason::BadRequest => (400, "BadRequest"),
                    DenialReason::Invalid => (422, "Invalid"),
                };
                ApiError::AdmissionDenied {
                    plugin: plugin.name().to_string(),
                    code,
                    reason,
                    message: denial.message,
                }
            })?;
        }
        Ok(request.object)
    }
}
