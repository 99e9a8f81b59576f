"""AWS: the GPU instance and GPU catalog (instances.json, gpus.yaml) and the Pulumi components."""
