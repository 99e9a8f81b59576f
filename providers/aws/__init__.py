"""AWS: the GPU instance and GPU catalog (instances.json, gpus.json) and the Pulumi components."""
