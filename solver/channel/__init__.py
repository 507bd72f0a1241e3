"""The conda packages of recipes/ (pointops, pointnet2_ops, mmcv), from recipe to channel: the
library behind `solver channel` (solver/channel/cli.py).

    recipe     find a recipe (by name or path) and its variant files; what it builds from
    render     the variant matrix (offline, or with the environments solved; noarch: once)
    build      rattler-build the variants of one platform (noarch: its one package)
    local      package a pointops built on this machine (offline)
    index      index a channel directory
    upload     upload to anaconda.org
    feedstock  the conda-forge recipe folder of a release
"""

from solver.channel.build import build_channel, check_reachable
from solver.channel.errors import ChannelError
from solver.channel.feedstock import build_sdist, write_feedstock_recipe
from solver.channel.index import current_platform, index_channel
from solver.channel.local import package_local
from solver.channel.recipe import RecipeFiles, find_recipe, recipe_files
from solver.channel.render import (
    BUILD_PLATFORMS,
    PLATFORMS,
    RenderedBuild,
    build_platform_for,
    render_matrix,
    render_platform,
    render_with_solve,
)
from solver.channel.upload import upload_channel

__all__ = [
    "BUILD_PLATFORMS",
    "PLATFORMS",
    "ChannelError",
    "RecipeFiles",
    "RenderedBuild",
    "build_channel",
    "build_platform_for",
    "build_sdist",
    "check_reachable",
    "current_platform",
    "find_recipe",
    "index_channel",
    "package_local",
    "recipe_files",
    "render_matrix",
    "render_platform",
    "render_with_solve",
    "upload_channel",
    "write_feedstock_recipe",
]
