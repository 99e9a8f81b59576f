"""Package discovery for a repository whose data packages sit at the top level.

templates/, providers/ and blueprints/ stay at the repository's top level (the product's layout);
installed, they live inside the fleetform package (fleetform.templates, ...), so no generic
top-level name (providers, templates) lands in site-packages. The package list is found, never
kept by hand: a hand-kept list once left out fleetform.render and shipped a fleetform whose
render, plan and diff crashed. Everything else is in pyproject.toml.
"""

from setuptools import find_packages, setup

DATA_PACKAGES = {"fleetform.providers": "providers", "fleetform.templates": "templates",
                 "fleetform.blueprints": "blueprints"}

packages = find_packages(include=["fleetform", "fleetform.*"])
package_dir = {"fleetform": "fleetform"}
for name, folder in DATA_PACKAGES.items():
    package_dir[name] = folder
    packages += [name] + [f"{name}.{sub}" for sub in find_packages(folder)]

setup(packages=sorted(packages), package_dir=package_dir)
