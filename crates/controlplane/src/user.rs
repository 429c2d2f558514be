//! Who makes a request: the identity authentication establishes ([`crate::auth`]) and
//! everything below the API layer (strategies, RBAC, admission, tokens) reads.

/// Who is making a request (see [`crate::auth`]), as kube-apiserver's `user.Info`; plain-HTTP
/// and in-process requests are an administrator.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct UserInfo {
    pub name: String,
    /// Empty when the authenticator knows none (client certificates, bootstrap tokens); a
    /// ServiceAccount's uid for its tokens.
    pub uid: String,
    pub groups: Vec<String>,
    /// Extra attributes the authenticator attaches (the credential id of certificates and
    /// ServiceAccount tokens, a bound token's pod).
    pub extra: std::collections::BTreeMap<String, Vec<String>>,
}

impl UserInfo {
    /// The identity of requests on plain HTTP and the in-process transport.
    pub fn anonymous_admin() -> Self {
        UserInfo {
            name: "system:admin".into(),
            groups: vec!["system:masters".into(), "system:authenticated".into()],
            ..Default::default()
        }
    }
}
