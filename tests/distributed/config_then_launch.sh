#!/bin/sh
# config_then_launch.sh ACCELERATE QUICKSTART: a person's first run, scripted. `accelerate config`
# is answered line by line (2 processes, FSDP, FULL_SHARD, the rest defaults), then
# `accelerate launch` trains the quick start's GPT-2 on 2 ranks from that file, no edits.
set -eu
accelerate=$1 quickstart=$2
here=$(cd "$(dirname "$0")" && pwd)
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
export ACC_CONFIG_HOME="$dir/home"   # where `accelerate config` writes by default
printf '2\nFSDP\nFULL_SHARD\n\n\n\n\n\n\n\n\n\nno\n' | "$accelerate" config
"$accelerate" config validate "$ACC_CONFIG_HOME/default_config.yaml"
"$accelerate" config show | grep -q "fsdp_sharding_strategy: FULL_SHARD"
# quickstart.sh launches with an explicit file; the default one is the same file.
"$here/quickstart.sh" "$accelerate" "$quickstart" 2 "$ACC_CONFIG_HOME/default_config.yaml"
