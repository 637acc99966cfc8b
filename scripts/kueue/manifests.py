#!/usr/bin/env python3
"""Kueue's manifests for a control plane whose Kueue manager runs outside the cluster, on 127.0.0.1.

Usage: manifests.py KUEUE_MODULE_DIR WEBHOOK_BASE_URL CA_FILE OUT_DIR

Reads the CRDs (config/components/crd/bases) and the webhook configurations (config/components/webhook/
manifests.yaml) from the Kueue module and writes OUT_DIR/crds.yaml and OUT_DIR/webhooks.yaml:
- every webhook's clientConfig points at WEBHOOK_BASE_URL + its path with CA_FILE as caBundle, instead of the
  in-cluster Service (kueue-webhook-service.kueue-system.svc) that Kueue's own certificate management expects;
- only the webhooks of Kueue's own objects and of batch/v1 Jobs are kept: the manager runs with the batch/job
  integration only, and a Pod or Deployment webhook with failurePolicy Fail would make every Pod or Deployment
  creation on the cluster depend on this one process;
- the CRDs that Kueue converts between v1beta1 and v1beta2 get the conversion webhook (/convert) that
  config/components/crd/patches adds in Kueue's own install, with the same URL and caBundle.
"""
import base64
import glob
import os
import sys

import yaml

# The CRDs config/components/crd/kustomization.yaml patches with the conversion webhook.
CONVERTED = {
    "localqueues.kueue.x-k8s.io",
    "clusterqueues.kueue.x-k8s.io",
    "cohorts.kueue.x-k8s.io",
    "workloads.kueue.x-k8s.io",
    "multikueueclusters.kueue.x-k8s.io",
}


def kept(webhook):
    groups = {g for rule in webhook.get("rules", []) for g in rule.get("apiGroups", [])}
    return bool(groups) and groups <= {"batch", "kueue.x-k8s.io"}


def main():
    module, base_url, ca_file, out = sys.argv[1:5]
    with open(ca_file, "rb") as f:
        ca_bundle = base64.b64encode(f.read()).decode()
    base_url = base_url.rstrip("/")

    crds = []
    for path in sorted(glob.glob(os.path.join(module, "config/components/crd/bases/*.yaml"))):
        with open(path) as f:
            for doc in yaml.safe_load_all(f):
                if not doc:
                    continue
                if doc["metadata"]["name"] in CONVERTED:
                    doc["spec"]["conversion"] = {
                        "strategy": "Webhook",
                        "webhook": {
                            "clientConfig": {"url": base_url + "/convert", "caBundle": ca_bundle},
                            "conversionReviewVersions": ["v1"],
                        },
                    }
                crds.append(doc)

    configs = []
    with open(os.path.join(module, "config/components/webhook/manifests.yaml")) as f:
        for doc in yaml.safe_load_all(f):
            if not doc:
                continue
            doc["metadata"]["name"] = "kueue-" + doc["metadata"]["name"]
            hooks = []
            for hook in doc.get("webhooks", []):
                if not kept(hook):
                    continue
                path = hook["clientConfig"]["service"]["path"]
                hook["clientConfig"] = {"url": base_url + path, "caBundle": ca_bundle}
                hooks.append(hook)
            doc["webhooks"] = hooks
            configs.append(doc)

    with open(os.path.join(out, "crds.yaml"), "w") as f:
        yaml.safe_dump_all(crds, f, sort_keys=False)
    with open(os.path.join(out, "webhooks.yaml"), "w") as f:
        yaml.safe_dump_all(configs, f, sort_keys=False)


if __name__ == "__main__":
    main()
