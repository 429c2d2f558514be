//! fleetform's embedded control plane: the general API server of `fleetform-controlplane` with
//! what OCM's hub adds to kube-apiserver for OCM's kinds, so that every cluster fleetform starts
//! (`up`, `fleetform controlplane`, the tests) behaves as an OCM hub would: the addon kinds'
//! conversion between `v1alpha1` and `v1beta1` (OCM's addon manager serves it as a conversion
//! webhook) and OCM's ManagedCluster admission webhooks ([`crate::admission`]), both registered
//! in-process.

use std::sync::Arc;

use fleetform_controlplane::conversion::Converter;
use fleetform_controlplane::{ControlPlane, ControlPlaneBuilder};
use serde_json::Value;

use crate::admission::{ManagedClusterMutator, ManagedClusterValidator};
use crate::api::conversion::convert_addon;

/// The CRDs whose versions [`AddonConversion`] converts between.
pub const CONVERTED_CRDS: [&str; 2] = [
    "managedclusteraddons.addon.open-cluster-management.io",
    "clustermanagementaddons.addon.open-cluster-management.io",
];

/// A control plane builder with fleetform's conversions and admission plugins registered; the
/// rest is the caller's.
pub fn builder() -> ControlPlaneBuilder {
    let conversion: Arc<dyn Converter> = Arc::new(AddonConversion);
    CONVERTED_CRDS
        .into_iter()
        .fold(ControlPlane::builder(), |builder, crd| {
            builder.conversion(crd, conversion.clone())
        })
        // Mutating before validating, as kube-apiserver calls webhooks.
        .admission(Arc::new(ManagedClusterMutator))
        .admission(Arc::new(ManagedClusterValidator))
}

/// Converts ManagedClusterAddOns and ClusterManagementAddOns between `v1alpha1` and `v1beta1`,
/// as OCM's conversion webhook does ([`convert_addon`]).
#[derive(Debug, Clone, Copy)]
pub struct AddonConversion;

impl Converter for AddonConversion {
    fn convert(
        &self,
        desired_api_version: &str,
        objects: Vec<Value>,
    ) -> Result<Vec<Value>, String> {
        objects
            .into_iter()
            .map(|object| convert_addon(object, desired_api_version))
            .collect()
    }
}
