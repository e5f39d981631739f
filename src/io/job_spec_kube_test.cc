// The Kubernetes readers (job_spec_kube.cc): Pods, Jobs and Kubeflow
// PyTorchJobs as their users write them, and what maps, what is ignored.
#include <gtest/gtest.h>

#include <algorithm>

#include "io/job_spec.h"
#include "io/job_spec_test_util.h"

namespace unipool::io {
namespace {

using namespace unipool::io::spec_test;

// Kubernetes objects in JSON, as kubectl -o json prints them.
TEST(JobSpecTest, ReadsAKubernetesPodInJson) {
  const ParsedJob p = Read(R"({
    "apiVersion": "v1",
    "kind": "Pod",
    "metadata": {"name": "json-pod", "uid": "1234"},
    "spec": {
        "containers": [{
            "name": "trainer",
            "command": ["python3", "-m", "torch.distributed.run", "--nproc_per_node=2", "t.py"],
            "resources": {"limits": {"nvidia.com/gpu": "2"}}
        }]
    },
    "status": {"phase": "Pending"}
})");
  EXPECT_EQ(p.job.name, "json-pod");
  EXPECT_EQ(p.job.gpus, 2);
  EXPECT_EQ(p.job.launch, LaunchMode::kPerTask);
  EXPECT_EQ(p.ignored, (Strings{"metadata.uid: ignored", "spec.containers[0].name: ignored",
                                "status: ignored"}));
}

// The Pod as a Kubernetes user writes it (examples/jobs/k8s-pod.yaml).
TEST(JobSpecTest, ReadsAKubernetesPod) {
  const ParsedJob p = ReadExample("k8s-pod.yaml");
  const JobRequest& j = p.job;
  EXPECT_EQ(j.source_kind, "v1 Pod");
  EXPECT_EQ(j.name, "gpu-training-pod");
  EXPECT_EQ(j.labels, (Pairs{{"app", "ai-training"}}));
  EXPECT_EQ(j.command, (Strings{"torchrun", "--nproc_per_node=8", "train_ddp.py"}));
  EXPECT_TRUE(j.args.empty());
  EXPECT_EQ(j.gpus, 8);
  EXPECT_EQ(j.gpus_per_task, 8);
  EXPECT_EQ(j.launch, LaunchMode::kPerTask);  // once in the pod: torchrun starts the 8 workers
  EXPECT_EQ(j.queue, "default");
  EXPECT_EQ(j.restart.max_restarts, 3);  // OnFailure: the default policy
  EXPECT_EQ(j.image, "registry.example.com/ai-training:v1.0");
  EXPECT_EQ(j.volumes, (Strings{"data=pvc:training-data-pvc", "output=pvc:training-output-pvc"}));
  EXPECT_EQ(p.ignored, (Strings{"spec.containers[0].name: ignored"}));
  ASSERT_EQ(j.mounts.size(), 2u);  // volumeMounts with the pod's volumes
  EXPECT_EQ(j.mounts[0].source, "pvc:training-data-pvc");
  EXPECT_EQ(j.mounts[0].path, "/data");
}

TEST(JobSpecTest, ReadsAKubernetesJob) {
  const ParsedJob p = ReadExample("k8s-job.yaml");
  const JobRequest& j = p.job;
  EXPECT_EQ(j.source_kind, "batch/v1 Job");
  EXPECT_EQ(j.name, "ddp-batch");
  EXPECT_EQ(j.queue, "research");  // the label unipool.io/queue
  EXPECT_EQ(j.gpus, 8);
  EXPECT_EQ(j.gpus_per_task, 4);  // a pod is a task; pods may share a node
  EXPECT_EQ(j.limits, (TaskLimits{32000, int64_t{256} << 30, 0}));  // the pod's
  EXPECT_EQ(j.restart.max_restarts, 4);
  EXPECT_EQ(j.time_limit, Seconds(86400));
  EXPECT_EQ(j.priority_class, "high");
  EXPECT_EQ(j.working_dir, "/workspace");
  EXPECT_EQ(j.command, (Strings{"python3", "examples/jobs/train_ddp.py"}));
  EXPECT_EQ(j.args, (Strings{"--steps", "200"}));
  EXPECT_EQ(j.env, (Pairs{{"NCCL_DEBUG", "INFO"}}));
  EXPECT_EQ(j.launch, LaunchMode::kPerTask);  // the command runs once per pod
  EXPECT_EQ(j.volumes, (Strings{"dataset=pvc:imagenet", "shm=emptyDir"}));
  const std::string c = "spec.template.spec.containers[0]";
  EXPECT_EQ(p.ignored,
            (Strings{
                "metadata.namespace: ignored (the queue comes from the label unipool.io/queue)",
                "spec.completions: ignored (the pods run once, as one gang)",
                "spec.ttlSecondsAfterFinished: ignored",
                "spec.template.metadata: ignored (the job's metadata applies)",
                "spec.template.spec.restartPolicy: ignored (restarts follow spec.backoffLimit)",
                "spec.template.spec.nodeSelector: ignored (placement follows the cluster topology)",
                "spec.template.spec.tolerations: ignored (placement follows the cluster topology)",
                c + ".name: ignored",
                c + ".env[1].valueFrom.fieldRef: ignored (only secretKeyRef is resolved: the "
                    "variable is not set)",
                c + ".resources.requests.cpu: ignored (not reserved: the limit is enforced, "
                    "where one is given)",
                "spec.template.spec.volumes[0].persistentVolumeClaim.readOnly: ignored",
            }));
}

TEST(JobSpecTest, ReadsAPyTorchJob) {
  const ParsedJob p = ReadExample("pytorchjob.yaml");
  const JobRequest& j = p.job;
  EXPECT_EQ(j.source_kind, "kubeflow.org/v1 PyTorchJob");
  EXPECT_EQ(j.name, "pytorch-ddp");
  EXPECT_EQ(j.gpus, 16);
  EXPECT_EQ(j.gpus_per_task, 8);
  EXPECT_EQ(j.launch, LaunchMode::kPerTask);
  EXPECT_EQ(j.restart.max_restarts, 2);
  EXPECT_EQ(j.command, (Strings{"python3", "examples/jobs/train_ddp.py", "--steps", "200"}));
  EXPECT_EQ(j.min_gpus, 0);
  const std::string m = "spec.pytorchReplicaSpecs.Master";
  EXPECT_EQ(p.ignored,
            (Strings{
                "metadata.namespace: ignored (the queue comes from the label unipool.io/queue)",
                "spec.runPolicy.cleanPodPolicy: ignored",
                m + ".restartPolicy: ignored (restarts follow runPolicy.backoffLimit)",
                m + ".template.spec.containers[0].name: ignored",
                m + ".template.spec.containers[0].imagePullPolicy: ignored",
                "spec.pytorchReplicaSpecs.Worker.restartPolicy: ignored (restarts follow "
                "runPolicy.backoffLimit)",
                "spec.pytorchReplicaSpecs.Worker.template: ignored except nvidia.com/gpu (the "
                "Master's pod spec runs on every pod)",
            }));
}

constexpr const char* kPyTorchElastic = R"(apiVersion: kubeflow.org/v1
kind: PyTorchJob
metadata:
  name: elastic
  labels: {kueue.x-k8s.io/queue-name: from-kueue}
spec:
  elasticPolicy: {minReplicas: 2, maxReplicas: 4, rdzvBackend: c10d}
  runPolicy:
    activeDeadlineSeconds: 7200
    schedulingPolicy: {queue: from-policy, priorityClass: low, minAvailable: 4}
  pytorchReplicaSpecs:
    Worker:
      replicas: 4
      template:
        spec:
          containers:
          - name: w
            command: [torchrun, --nproc_per_node=4, train.py]
            resources: {requests: {nvidia.com/gpu: 4}}
)";

TEST(JobSpecTest, PyTorchJobWithOnlyWorkersAndAnElasticPolicy) {
  const ParsedJob p = Read(kPyTorchElastic);
  EXPECT_EQ(p.job.gpus, 16);
  EXPECT_EQ(p.job.gpus_per_task, 4);
  EXPECT_EQ(p.job.min_gpus, 8);
  EXPECT_EQ(p.job.time_limit, Seconds(7200));
  EXPECT_EQ(p.job.priority_class, "low");
  EXPECT_EQ(p.job.queue, "from-policy");  // before the Kueue label
  EXPECT_EQ(p.job.launch, LaunchMode::kPerTask);
  EXPECT_NE(
      std::find(p.ignored.begin(), p.ignored.end(),
                "spec.runPolicy.schedulingPolicy.minAvailable: ignored (a gang starts whole)"),
      p.ignored.end());
  EXPECT_NE(std::find(p.ignored.begin(), p.ignored.end(),
                      "spec.elasticPolicy.maxReplicas: ignored (replicas set the maximum)"),
            p.ignored.end());
}

TEST(JobSpecTest, QueueComesFromLabels) {
  EXPECT_EQ(
      Read(Pod("  labels: {kueue.x-k8s.io/queue-name: k, unipool.io/queue: u}\n", "", kOneGpu))
          .job.queue,
      "u");
  EXPECT_EQ(Read(Pod("  labels: {kueue.x-k8s.io/queue-name: k}\n", "", kOneGpu)).job.queue, "k");
  EXPECT_EQ(Read(Pod("  namespace: team-a\n", "", kOneGpu)).job.queue, "default");
}

TEST(JobSpecTest, PodFieldsThatMap) {
  const ParsedJob p = Read(Pod("  annotations: {a: b}\n",
                               "  restartPolicy: Never\n  priority: 100\n"
                               "  priorityClassName: system-node-critical\n"
                               "  activeDeadlineSeconds: 600\n",
                               kOneGpu));
  EXPECT_EQ(p.job.restart.max_restarts, 0);
  EXPECT_EQ(p.job.priority, 100);
  EXPECT_EQ(p.job.priority_class, "");
  EXPECT_EQ(p.job.time_limit, Seconds(600));
  EXPECT_EQ(p.ignored, (Strings{"metadata.annotations: ignored",
                                "spec.priorityClassName: ignored ('system-node-critical' is not "
                                "low, normal or high)",
                                "spec.containers[0].name: ignored"}));
}

TEST(JobSpecTest, OnlyTheGpuContainerRuns) {
  const std::string text = R"(apiVersion: v1
kind: Pod
metadata: {name: sidecars}
spec:
  initContainers: [{name: init, image: busybox}]
  containers:
  - {name: log, image: fluentbit, command: [fluent-bit]}
  - name: train
    command: [python3, t.py]
    env: [{name: A, value: "1"}, {name: B, valueFrom: {secretKeyRef: {name: s, key: k}}}]
    resources: {limits: {nvidia.com/gpu: 2}, requests: {nvidia.com/gpu: "2"}}
)";
  const ParsedJob p = Read(text);
  EXPECT_EQ(p.job.command, (Strings{"python3", "t.py"}));
  EXPECT_EQ(p.job.env, (Pairs{{"A", "1"}}));
  EXPECT_EQ(p.job.gpus, 2);
  EXPECT_EQ(p.ignored, (Strings{"spec.initContainers: ignored (init containers are not run)",
                                "spec.containers[0]: ignored (only the container that requests "
                                "nvidia.com/gpu runs)",
                                "spec.containers[1].name: ignored"}));
  // A secretKeyRef is read on the node (the agent's --secret-dir).
  EXPECT_EQ(p.job.secret_refs, (Pairs{{"B", "s/k"}}));
}

// Kubernetes: a pod is a task run once; spread over nodes where the pod
// spec says so (hostname spread constraints, pod anti-affinity).
TEST(JobSpecTest, KubernetesSpreadConstraintsSpreadThePods) {
  auto job = [](const std::string& extra) {
    return "apiVersion: batch/v1\nkind: Job\nmetadata: {name: k}\nspec:\n  parallelism: 4\n"
           "  template:\n    spec:\n" +
           extra +
           "      containers:\n      - name: c\n        command: [python3, t.py]\n"
           "        resources: {limits: {nvidia.com/gpu: 2}}\n";
  };
  EXPECT_EQ(Read(job("")).job.spread, Spread::kPack);
  ParsedJob tsc =
      Read(job("      topologySpreadConstraints:\n      - {maxSkew: 1, topologyKey: "
               "kubernetes.io/hostname, whenUnsatisfiable: DoNotSchedule}\n"));
  EXPECT_EQ(tsc.job.spread, Spread::kSpread);
  EXPECT_EQ(tsc.job.gpus_per_task, 2);
  EXPECT_EQ(tsc.job.launch, LaunchMode::kPerTask);
  ParsedJob anti =
      Read(job("      affinity:\n        podAntiAffinity:\n          "
               "requiredDuringSchedulingIgnoredDuringExecution:\n          - {topologyKey: "
               "kubernetes.io/hostname, labelSelector: {matchLabels: {app: k}}}\n"));
  EXPECT_EQ(anti.job.spread, Spread::kSpread);
  ParsedJob zone =
      Read(job("      topologySpreadConstraints:\n      - {maxSkew: 1, topologyKey: "
               "topology.kubernetes.io/zone}\n"));
  EXPECT_EQ(zone.job.spread, Spread::kPack);
  EXPECT_NE(std::find_if(zone.ignored.begin(), zone.ignored.end(),
                         [](const std::string& s) {
                           return s.starts_with("spec.template.spec.topologySpreadConstraints[0]");
                         }),
            zone.ignored.end());
}

}  // namespace
}  // namespace unipool::io
