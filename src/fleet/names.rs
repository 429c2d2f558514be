//! Kubernetes name rules and "did you mean" suggestions.

/// Why `name` is not a DNS-1123 label (at most 63 characters of `a-z`, `0-9` and `-`, starting
/// and ending with an alphanumeric), or `None` when it is one.
pub fn dns1123_label_error(name: &str) -> Option<String> {
    const RULE: &str =
        "lowercase letters, digits and '-', starting and ending with a letter or digit";
    if name.is_empty() {
        return Some("must not be empty".to_string());
    }
    if name.len() > 63 {
        return Some(format!(
            "is {} characters long, at most 63 are allowed",
            name.len()
        ));
    }
    let alnum = |c: char| c.is_ascii_lowercase() || c.is_ascii_digit();
    if !name.chars().all(|c| alnum(c) || c == '-')
        || !name.starts_with(alnum)
        || !name.ends_with(alnum)
    {
        return Some(format!("is not a DNS-1123 label ({RULE})"));
    }
    None
}

/// Why `name` is not a DNS-1123 subdomain (dot-separated labels, at most 253 characters), or
/// `None` when it is one.
pub fn dns1123_subdomain_error(name: &str) -> Option<String> {
    if name.len() > 253 {
        return Some(format!(
            "is {} characters long, at most 253 are allowed",
            name.len()
        ));
    }
    if name
        .split('.')
        .any(|label| dns1123_label_error(label).is_some())
    {
        return Some(
            "is not a DNS-1123 subdomain (dot-separated lowercase labels of letters, digits and '-')"
                .to_string(),
        );
    }
    None
}

/// Why `signer` is not a valid certificate signer name (`example.com/signer-name`, as
/// Kubernetes requires of CSRs), or `None` when it is one.
pub fn signer_name_error(signer: &str) -> Option<String> {
    const FORM: &str = "must be a domain and a path, like example.com/signer-name";
    let Some((domain, path)) = signer.split_once('/') else {
        return Some(format!("has no '/': {FORM}"));
    };
    if !domain.contains('.') || dns1123_subdomain_error(domain).is_some() {
        return Some(format!("has no fully qualified domain before '/': {FORM}"));
    }
    let path_char = |c: char| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.' | '/');
    if path.is_empty() || path.ends_with('/') || !path.chars().all(path_char) {
        return Some(format!(
            "has an invalid path after '/' (letters, digits, '-', '_', '.', '/'): {FORM}"
        ));
    }
    if signer.len() > 571 {
        return Some(format!(
            "is {} characters long, at most 571 are allowed",
            signer.len()
        ));
    }
    None
}

/// The candidate closest to `word`, if it is close enough to be a likely misspelling.
pub fn closest<'a>(word: &str, candidates: impl IntoIterator<Item = &'a str>) -> Option<&'a str> {
    let lowered = word.to_ascii_lowercase();
    candidates
        .into_iter()
        .map(|candidate| {
            let distance = strsim::damerau_levenshtein(&lowered, &candidate.to_ascii_lowercase());
            (distance, candidate)
        })
        .filter(|(distance, candidate)| *distance <= (candidate.len().max(word.len()) / 3).max(1))
        .min()
        .map(|(_, candidate)| candidate)
}

/// `"; did you mean \"x\"?"` for the closest candidate, or nothing.
pub fn did_you_mean<'a>(word: &str, candidates: impl IntoIterator<Item = &'a str>) -> String {
    closest(word, candidates)
        .map(|candidate| format!("; did you mean {candidate:?}?"))
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dns_labels() {
        assert_eq!(dns1123_label_error("spoke-1"), None);
        assert!(dns1123_label_error("Spoke").is_some());
        assert!(dns1123_label_error("-a").is_some());
        assert!(dns1123_label_error("a.b").is_some());
        assert!(
            dns1123_label_error(&"a".repeat(64))
                .unwrap()
                .contains("at most 63")
        );
        assert_eq!(dns1123_subdomain_error("a.b-c.d"), None);
        assert!(dns1123_subdomain_error("a..b").is_some());
    }

    #[test]
    fn signer_names() {
        assert_eq!(
            signer_name_error("kubernetes.io/kube-apiserver-client"),
            None
        );
        assert_eq!(signer_name_error("example.com/observability/metrics"), None);
        assert!(
            signer_name_error("observability")
                .unwrap()
                .contains("no '/'")
        );
        assert!(signer_name_error("localhost/x").unwrap().contains("domain"));
        assert!(signer_name_error("example.com/").unwrap().contains("path"));
    }

    #[test]
    fn suggestions_find_likely_misspellings_only() {
        let fields = ["hubRef", "kubeconfig", "leaseDurationSeconds", "addons"];
        assert_eq!(closest("hubref", fields), Some("hubRef"));
        assert_eq!(
            closest("leaseDurationSecond", fields),
            Some("leaseDurationSeconds")
        );
        assert_eq!(closest("kubeconifg", fields), Some("kubeconfig"));
        assert_eq!(closest("zzz", fields), None);
    }
}
