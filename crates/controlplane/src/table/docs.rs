//! kube-apiserver's descriptions of the fields built-in kinds' table columns show: the API
//! types' own documentation, which its printers quote. Only the fields a column here shows.

/// The documentation of `field` of `type_` at `version`; empty for a field not listed.
pub fn doc(version: &str, type_: &str, field: &str) -> &'static str {
    match (version, type_, field) {
        ("apps/v1", "ControllerRevision", "revision") => {
            "Revision indicates the revision of the state represented by Data."
        }
        ("apps/v1", "DaemonSetSpec", "selector") => {
            "A label query over pods that are managed by the daemon set. Must match in order to be controlled. It must match the pod template's labels. More info: https://kubernetes.io/docs/concepts/overview/working-with-objects/labels/#label-selectors"
        }
        ("apps/v1", "DaemonSetStatus", "currentNumberScheduled") => {
            "The number of nodes that are running at least 1 daemon pod and are supposed to run the daemon pod. More info: https://kubernetes.io/docs/concepts/workloads/controllers/daemonset/"
        }
        ("apps/v1", "DaemonSetStatus", "desiredNumberScheduled") => {
            "The total number of nodes that should be running the daemon pod (including nodes correctly running the daemon pod). More info: https://kubernetes.io/docs/concepts/workloads/controllers/daemonset/"
        }
        ("apps/v1", "DaemonSetStatus", "numberAvailable") => {
            "The number of nodes that should be running the daemon pod and have one or more of the daemon pod running and available (ready for at least spec.minReadySeconds)"
        }
        ("apps/v1", "DaemonSetStatus", "numberReady") => {
            "numberReady is the number of nodes that should be running the daemon pod and have one or more of the daemon pod running with a Ready Condition."
        }
        ("apps/v1", "DaemonSetStatus", "updatedNumberScheduled") => {
            "The total number of nodes that are running updated daemon pod"
        }
        ("apps/v1", "DeploymentSpec", "selector") => {
            "Label selector for pods. Existing ReplicaSets whose pods are selected by this will be the ones affected by this deployment. It must match the pod template's labels."
        }
        ("apps/v1", "DeploymentStatus", "availableReplicas") => {
            "Total number of available non-terminating pods (ready for at least minReadySeconds) targeted by this deployment."
        }
        ("apps/v1", "DeploymentStatus", "updatedReplicas") => {
            "Total number of non-terminating pods targeted by this deployment that have the desired template spec."
        }
        ("apps/v1", "ReplicaSetSpec", "replicas") => {
            "Replicas is the number of desired pods. This is a pointer to distinguish between explicit zero and unspecified. Defaults to 1. More info: https://kubernetes.io/docs/concepts/workloads/controllers/replicaset"
        }
        ("apps/v1", "ReplicaSetSpec", "selector") => {
            "Selector is a label query over pods that should match the replica count. Label keys and values that must match in order to be controlled by this replica set. It must match the pod template's labels. More info: https://kubernetes.io/docs/concepts/overview/working-with-objects/labels/#label-selectors"
        }
        ("apps/v1", "ReplicaSetStatus", "readyReplicas") => {
            "The number of non-terminating pods targeted by this ReplicaSet with a Ready Condition."
        }
        ("apps/v1", "ReplicaSetStatus", "replicas") => {
            "Replicas is the most recently observed number of non-terminating pods. More info: https://kubernetes.io/docs/concepts/workloads/controllers/replicaset"
        }
        ("autoscaling/v2", "HorizontalPodAutoscalerSpec", "maxReplicas") => {
            "maxReplicas is the upper limit for the number of replicas to which the autoscaler can scale up. It cannot be less that minReplicas."
        }
        ("autoscaling/v2", "HorizontalPodAutoscalerSpec", "metrics") => {
            "metrics contains the specifications for which to use to calculate the desired replica count (the maximum replica count across all metrics will be used).  The desired replica count is calculated multiplying the ratio between the target value and the current value by the current number of pods.  Ergo, metrics used must decrease as the pod count is increased, and vice-versa.  See the individual metric source types for more information about how each type of metric must respond. If not set, the default metric will be set to 80% average CPU utilization."
        }
        ("autoscaling/v2", "HorizontalPodAutoscalerSpec", "minReplicas") => {
            "minReplicas is the lower limit for the number of replicas to which the autoscaler can scale down.  It defaults to 1 pod.  minReplicas is allowed to be 0 if the alpha feature gate HPAScaleToZero is enabled and at least one Object or External metric is configured.  Scaling is active as long as at least one metric value is available."
        }
        ("autoscaling/v2", "HorizontalPodAutoscalerSpec", "scaleTargetRef") => {
            "scaleTargetRef points to the target resource to scale, and is used to the pods for which metrics should be collected, as well as to actually change the replica count."
        }
        ("autoscaling/v2", "HorizontalPodAutoscalerStatus", "currentReplicas") => {
            "currentReplicas is current number of replicas of pods managed by this autoscaler, as last seen by the autoscaler."
        }
        ("batch/v1", "CronJobSpec", "schedule") => {
            "The schedule in Cron format, see https://en.wikipedia.org/wiki/Cron."
        }
        ("batch/v1", "CronJobSpec", "suspend") => {
            "This flag tells the controller to suspend subsequent executions, it does not apply to already started executions.  Defaults to false."
        }
        ("batch/v1", "CronJobSpec", "timeZone") => {
            "The time zone name for the given schedule, see https://en.wikipedia.org/wiki/List_of_tz_database_time_zones. If not specified, this will default to the time zone of the kube-controller-manager process. The set of valid time zone names and the time zone offset is loaded from the system-wide time zone database by the API server during CronJob validation and the controller manager during execution. If no system-wide time zone database can be found a bundled version of the database is used instead. If the time zone name becomes invalid during the lifetime of a CronJob or due to a change in host configuration, the controller will stop creating new new Jobs and will create a system event with the reason UnknownTimeZone. More information can be found in https://kubernetes.io/docs/concepts/workloads/controllers/cron-jobs/#time-zones"
        }
        ("batch/v1", "CronJobStatus", "active") => "A list of pointers to currently running jobs.",
        ("batch/v1", "CronJobStatus", "lastScheduleTime") => {
            "Information when was the last time the job was successfully scheduled."
        }
        ("batch/v1", "JobSpec", "selector") => {
            "A label query over pods that should match the pod count. Normally, the system sets this field for you. More info: https://kubernetes.io/docs/concepts/overview/working-with-objects/labels/#label-selectors"
        }
        ("batch/v1", "JobStatus", "succeeded") => {
            "The number of pods which reached phase Succeeded. The value increases monotonically for a given spec. However, it may decrease in reaction to scale down of elastic indexed jobs."
        }
        ("coordination.k8s.io/v1", "LeaseSpec", "holderIdentity") => {
            "holderIdentity contains the identity of the holder of a current lease. If Coordinated Leader Election is used, the holder identity must be equal to the elected LeaseCandidate.metadata.name field."
        }
        ("discovery.k8s.io/v1", "EndpointSlice", "addressType") => {
            "addressType specifies the type of address carried by this EndpointSlice. All addresses in this slice must be the same type. This field is immutable after creation. The following address types are currently supported: * IPv4: Represents an IPv4 Address. * IPv6: Represents an IPv6 Address. * FQDN: Represents a Fully Qualified Domain Name. (Deprecated) The EndpointSlice controller only generates, and kube-proxy only processes, slices of addressType \"IPv4\" and \"IPv6\". No semantics are defined for the \"FQDN\" type."
        }
        ("discovery.k8s.io/v1", "EndpointSlice", "endpoints") => {
            "endpoints is a list of unique endpoints in this slice. Each slice may include a maximum of 1000 endpoints."
        }
        ("discovery.k8s.io/v1", "EndpointSlice", "ports") => {
            "ports specifies the list of network ports exposed by each endpoint in this slice. Each port must have a unique name. Each slice may include a maximum of 100 ports. Services always have at least 1 port, so EndpointSlices generated by the EndpointSlice controller will likewise always have at least 1 port. EndpointSlices used for other purposes may have an empty ports list."
        }
        ("meta.k8s.io/v1", "ObjectMeta", "creationTimestamp") => {
            "CreationTimestamp is a timestamp representing the server time when this object was created. It is not guaranteed to be set in happens-before order across separate operations. Clients may not set this value. It is represented in RFC3339 form and is in UTC.\n\nPopulated by the system. Read-only. Null for lists. More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#metadata"
        }
        ("meta.k8s.io/v1", "ObjectMeta", "name") => {
            "Name must be unique within a namespace. Is required when creating resources, although some resources may allow a client to request the generation of an appropriate name automatically. Name is primarily intended for creation idempotence and configuration definition. Cannot be updated. More info: https://kubernetes.io/docs/concepts/overview/working-with-objects/names#names"
        }
        ("networking.k8s.io/v1", "NetworkPolicySpec", "podSelector") => {
            "podSelector selects the pods to which this NetworkPolicy object applies. The array of rules is applied to any pods selected by this field. An empty selector matches all pods in the policy's namespace. Multiple network policies can select the same set of pods. In this case, the ingress rules for each are combined additively. This field is optional. If it is not specified, it defaults to an empty selector."
        }
        ("scheduling.k8s.io/v1", "PriorityClass", "globalDefault") => {
            "globalDefault specifies whether this PriorityClass should be considered as the default priority for pods that do not have any priority class. Only one PriorityClass can be marked as `globalDefault`. However, if more than one PriorityClasses exists with their `globalDefault` field set to true, the smallest value of such global default PriorityClasses will be used as the default priority."
        }
        ("scheduling.k8s.io/v1", "PriorityClass", "preemptionPolicy") => {
            "preemptionPolicy is the Policy for preempting pods with lower priority. One of Never, PreemptLowerPriority. Defaults to PreemptLowerPriority if unset."
        }
        ("scheduling.k8s.io/v1", "PriorityClass", "value") => {
            "value represents the integer value of this priority class. This is the actual priority that pods receive when they have the name of this class in their pod spec."
        }
        ("storage.k8s.io/v1", "CSIDriverSpec", "attachRequired") => {
            "attachRequired indicates this CSI volume driver requires an attach operation (because it implements the CSI ControllerPublishVolume() method), and that the Kubernetes attach detach controller should call the attach volume interface which checks the volumeattachment status and waits until the volume is attached before proceeding to mounting. The CSI external-attacher coordinates with CSI volume driver and updates the volumeattachment status when the attach operation is complete. If the value is specified to false, the attach operation will be skipped. Otherwise the attach operation will be called.\n\nThis field is immutable."
        }
        ("storage.k8s.io/v1", "CSIDriverSpec", "podInfoOnMount") => {
            "podInfoOnMount indicates this CSI volume driver requires additional pod information (like podName, podUID, etc.) during mount operations, if set to true. If set to false, pod information will not be passed on mount. Default is false.\n\nThe CSI driver specifies podInfoOnMount as part of driver deployment. If true, Kubelet will pass pod information as VolumeContext in the CSI NodePublishVolume() calls. The CSI driver is responsible for parsing and validating the information passed in as VolumeContext.\n\nThe following VolumeContext will be passed if podInfoOnMount is set to true. This list might grow, but the prefix will be used. \"csi.storage.k8s.io/pod.name\": pod.Name \"csi.storage.k8s.io/pod.namespace\": pod.Namespace \"csi.storage.k8s.io/pod.uid\": string(pod.UID) \"csi.storage.k8s.io/ephemeral\": \"true\" if the volume is an ephemeral inline volume\n                                defined by a CSIVolumeSource, otherwise \"false\"\n\n\"csi.storage.k8s.io/ephemeral\" is a new feature in Kubernetes 1.16. It is only required for drivers which support both the \"Persistent\" and \"Ephemeral\" VolumeLifecycleMode. Other drivers can leave pod info disabled and/or ignore this field. As Kubernetes 1.15 doesn't support this field, drivers can only support one mode when deployed on such a cluster and the deployment determines which mode that is, for example via a command line parameter of the driver.\n\nThis field was immutable in Kubernetes < 1.29 and now is mutable."
        }
        ("storage.k8s.io/v1", "CSIDriverSpec", "requiresRepublish") => {
            "requiresRepublish indicates the CSI driver wants `NodePublishVolume` being periodically called to reflect any possible change in the mounted volume. This field defaults to false.\n\nNote: After a successful initial NodePublishVolume call, subsequent calls to NodePublishVolume should only update the contents of the volume. New mount points will not be seen by a running container."
        }
        ("storage.k8s.io/v1", "CSIDriverSpec", "storageCapacity") => {
            "storageCapacity indicates that the CSI volume driver wants pod scheduling to consider the storage capacity that the driver deployment will report by creating CSIStorageCapacity objects with capacity information, if set to true.\n\nThe check can be enabled immediately when deploying a driver. In that case, provisioning new volumes with late binding will pause until the driver deployment has published some suitable CSIStorageCapacity object.\n\nAlternatively, the driver can be deployed with the field unset or false and it can be flipped later when storage capacity information has been published.\n\nThis field was immutable in Kubernetes <= 1.22 and now is mutable."
        }
        ("storage.k8s.io/v1", "CSIDriverSpec", "tokenRequests") => {
            "tokenRequests indicates the CSI driver needs pods' service account tokens it is mounting volume for to do necessary authentication. Kubelet will pass the tokens in VolumeContext in the CSI NodePublishVolume calls. The CSI driver should parse and validate the following VolumeContext: \"csi.storage.k8s.io/serviceAccount.tokens\": {\n  \"<audience>\": {\n    \"token\": <token>,\n    \"expirationTimestamp\": <expiration timestamp in RFC3339>,\n  },\n  ...\n}\n\nNote: Audience in each TokenRequest should be different and at most one token is empty string. To receive a new token after expiry, RequiresRepublish can be used to trigger NodePublishVolume periodically."
        }
        ("storage.k8s.io/v1", "CSIDriverSpec", "volumeLifecycleModes") => {
            "volumeLifecycleModes defines what kind of volumes this CSI volume driver supports. The default if the list is empty is \"Persistent\", which is the usage defined by the CSI specification and implemented in Kubernetes via the usual PV/PVC mechanism.\n\nThe other mode is \"Ephemeral\". In this mode, volumes are defined inline inside the pod spec with CSIVolumeSource and their lifecycle is tied to the lifecycle of that pod. A driver has to be aware of this because it is only going to get a NodePublishVolume call for such a volume.\n\nFor more information about implementing this mode, see https://kubernetes-csi.github.io/docs/ephemeral-local-volumes.html A driver can support one or more of these modes and more modes may be added in the future.\n\nThis field is beta. This field is immutable."
        }
        ("storage.k8s.io/v1", "StorageClass", "allowVolumeExpansion") => {
            "allowVolumeExpansion shows whether the storage class allow volume expand."
        }
        ("storage.k8s.io/v1", "StorageClass", "provisioner") => {
            "provisioner indicates the type of the provisioner."
        }
        ("storage.k8s.io/v1", "StorageClass", "reclaimPolicy") => {
            "reclaimPolicy controls the reclaimPolicy for dynamically provisioned PersistentVolumes of this storage class. Defaults to Delete."
        }
        ("storage.k8s.io/v1", "StorageClass", "volumeBindingMode") => {
            "volumeBindingMode indicates how PersistentVolumeClaims should be provisioned and bound.  When unset, VolumeBindingImmediate is used. This field is only honored by servers that enable the VolumeScheduling feature."
        }
        ("storage.k8s.io/v1", "VolumeAttachmentSource", "persistentVolumeName") => {
            "persistentVolumeName represents the name of the persistent volume to attach."
        }
        ("storage.k8s.io/v1", "VolumeAttachmentSpec", "attacher") => {
            "attacher indicates the name of the volume driver that MUST handle this request. This is the name returned by GetPluginName()."
        }
        ("storage.k8s.io/v1", "VolumeAttachmentSpec", "nodeName") => {
            "nodeName represents the node that the volume should be attached to."
        }
        ("storage.k8s.io/v1", "VolumeAttachmentStatus", "attached") => {
            "attached indicates the volume is successfully attached. This field must only be set by the entity completing the attach operation, i.e. the external-attacher."
        }
        ("v1", "ConfigMap", "data") => {
            "Data contains the configuration data. Each key must consist of alphanumeric characters, '-', '_' or '.'. Values with non-UTF-8 byte sequences must use the BinaryData field. The keys stored in Data must not overlap with the keys in the BinaryData field, this is enforced during validation process."
        }
        ("v1", "Endpoints", "subsets") => {
            "The set of all endpoints is the union of all subsets. Addresses are placed into subsets according to the IPs they share. A single address with multiple ports, some of which are ready and some of which are not (because they come from different containers) will result in the address being displayed in different subsets for the different ports. No address will appear in both Addresses and NotReadyAddresses in the same subset. Sets of addresses and ports that comprise a service."
        }
        ("v1", "PersistentVolumeClaimSpec", "volumeMode") => {
            "volumeMode defines what type of volume is required by the claim. Value of Filesystem is implied when not included in claim spec."
        }
        ("v1", "PersistentVolumeClaimSpec", "volumeName") => {
            "volumeName is the binding reference to the PersistentVolume backing this claim."
        }
        ("v1", "PersistentVolumeClaimStatus", "accessModes") => {
            "accessModes contains the actual access modes the volume backing the PVC has. More info: https://kubernetes.io/docs/concepts/storage/persistent-volumes#access-modes-1"
        }
        ("v1", "PersistentVolumeClaimStatus", "capacity") => {
            "capacity represents the actual resources of the underlying volume."
        }
        ("v1", "PersistentVolumeClaimStatus", "phase") => {
            "phase represents the current phase of PersistentVolumeClaim."
        }
        ("v1", "PersistentVolumeSpec", "accessModes") => {
            "accessModes contains all ways the volume can be mounted. More info: https://kubernetes.io/docs/concepts/storage/persistent-volumes#access-modes"
        }
        ("v1", "PersistentVolumeSpec", "capacity") => {
            "capacity is the description of the persistent volume's resources and capacity. More info: https://kubernetes.io/docs/concepts/storage/persistent-volumes#capacity"
        }
        ("v1", "PersistentVolumeSpec", "claimRef") => {
            "claimRef is part of a bi-directional binding between PersistentVolume and PersistentVolumeClaim. Expected to be non-nil when bound. claim.VolumeName is the authoritative bind between PV and PVC. More info: https://kubernetes.io/docs/concepts/storage/persistent-volumes#binding"
        }
        ("v1", "PersistentVolumeSpec", "persistentVolumeReclaimPolicy") => {
            "persistentVolumeReclaimPolicy defines what happens to a persistent volume when released from its claim. Valid options are Retain (default for manually created PersistentVolumes), Delete (default for dynamically provisioned PersistentVolumes), and Recycle (deprecated). Recycle must be supported by the volume plugin underlying this PersistentVolume. More info: https://kubernetes.io/docs/concepts/storage/persistent-volumes#reclaiming"
        }
        ("v1", "PersistentVolumeSpec", "volumeMode") => {
            "volumeMode defines if a volume is intended to be used with a formatted filesystem or to remain in raw block state. Value of Filesystem is implied when not included in spec."
        }
        ("v1", "PersistentVolumeStatus", "phase") => {
            "phase indicates if a volume is available, bound to a claim, or released by a claim. More info: https://kubernetes.io/docs/concepts/storage/persistent-volumes#phase"
        }
        ("v1", "PersistentVolumeStatus", "reason") => {
            "reason is a brief CamelCase string that describes any failure and is meant for machine parsing and tidy display in the CLI."
        }
        ("v1", "PodSpec", "nodeSelector") => {
            "NodeSelector is a selector which must be true for the pod to fit on a node. Selector which must match a node's labels for the pod to be scheduled on that node. More info: https://kubernetes.io/docs/concepts/configuration/assign-pod-node/"
        }
        ("v1", "ReplicationControllerSpec", "replicas") => {
            "Replicas is the number of desired replicas. This is a pointer to distinguish between explicit zero and unspecified. Defaults to 1. More info: https://kubernetes.io/docs/concepts/workloads/controllers/replicationcontroller#what-is-a-replicationcontroller"
        }
        ("v1", "ReplicationControllerSpec", "selector") => {
            "Selector is a label query over pods that should match the Replicas count. If Selector is empty, it is defaulted to the labels present on the Pod template. Label keys and values that must match in order to be controlled by this replication controller, if empty defaulted to labels on Pod template. More info: https://kubernetes.io/docs/concepts/overview/working-with-objects/labels/#label-selectors"
        }
        ("v1", "ReplicationControllerStatus", "readyReplicas") => {
            "The number of ready replicas for this replication controller."
        }
        ("v1", "ReplicationControllerStatus", "replicas") => {
            "Replicas is the most recently observed number of replicas. More info: https://kubernetes.io/docs/concepts/workloads/controllers/replicationcontroller#what-is-a-replicationcontroller"
        }
        ("v1", "Secret", "data") => {
            "Data contains the secret data. Each key must consist of alphanumeric characters, '-', '_' or '.'. The serialized form of the secret data is a base64 encoded string, representing the arbitrary (possibly non-string) data value here. Described in https://tools.ietf.org/html/rfc4648#section-4"
        }
        ("v1", "Secret", "type") => {
            "Used to facilitate programmatic handling of secret data. More info: https://kubernetes.io/docs/concepts/configuration/secret/#secret-types"
        }
        ("v1", "ServiceAccount", "secrets") => {
            "Secrets is a list of the secrets in the same namespace that pods running using this ServiceAccount are allowed to use. Pods are only limited to this list if this service account has a \"kubernetes.io/enforce-mountable-secrets\" annotation set to \"true\". The \"kubernetes.io/enforce-mountable-secrets\" annotation is deprecated since v1.32. Prefer separate namespaces to isolate access to mounted secrets. This field should not be used to find auto-generated service account token secrets for use outside of pods. Instead, tokens can be requested directly using the TokenRequest API, or service account token secrets can be manually created. More info: https://kubernetes.io/docs/concepts/configuration/secret"
        }
        _ => "",
    }
}
