"""Providers: catalog data and, for clouds, the Pulumi components that build their resources."""
