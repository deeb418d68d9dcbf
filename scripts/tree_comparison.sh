#!/usr/bin/env bash
# Issue 45's learning comparison on a recipe (RECIPE: gym, the default, tool_use, tool_chain, tool_choice or
# tool_pick): tree rollouts with tree_grpo against flat GRPO and flat GiGPO at no more cost per step (the recipe's
# prompts a step; flat: 4 episodes each; tree: one tree each, forked into 2 before the first turn and each child
# into 2 after it, so 4 leaves per prompt that share first turns pairwise: for the same policy no more generated
# tokens than flat; `rollout/generated_tokens` measures it). Runs one at a time (2 cores).
# The seed is `rollout.seed` alone, as in docs/recipes/gym.md's flat runs.
# `treegigpo`: the same trees credited by GiGPO (a fork's children share their anchor state exactly).
# `treefillgigpo`: the filled trees (below) credited by GiGPO.
# `treefill`: the tree arm with `rollout.tree.fill`: an episode that ends at its first turn hands its second leaf
# back and the tree starts another first branch, so a tree always has flat's 4 leaves a prompt.
# `treefill2`: treefill with both Tree-GRPO terms at 2x (`trainer.tree_intra_weight=2`, `trainer.tree_inter_weight=2`):
# a leaf's advantage on the scale of the recipe's GiGPO (|A| about 2.2 against treefill's 1.2), so that the recipe's
# entropy bonus, chosen against GiGPO's, weighs as much against the trees' credit as against GiGPO's.
# `treeeq`: filled trees at about flat's generated tokens a step: one tree a prompt, 3 first turns each forked
# into 3 after it (up to 9 leaves), no longer forking once the tree generated TREE_TOKENS (`rollout.tree.max_tokens`;
# defaults chosen so that, with what the running episodes add after the last fork, a tree spends about flat's tokens
# a prompt a step: gym ~21, tool_use ~180; measured 0.8-1.4x and 1.15x; tool_choice at 90: 1.3-1.4x).
# `treeeqw`: treeeq with `trainer.tree_prefix_weight=leaves`: a turn shared by k leaves is trained once at k times
# its advantage (the paper's weight), so a tree's first turns weigh what flat's episodes' first turns weigh.
# `treehot`: treefill whose children after the first turn sample at CHILD_T (default 1.5;
# `rollout.tree.child_temperature`), so that siblings from one state differ more often.
# `treehalf`: treefill with both Tree-GRPO terms at half weight (`trainer.tree_intra_weight=0.5`,
# `trainer.tree_inter_weight=0.5`): a leaf's advantage on the scale of flat GRPO's rather than up to twice it.
# `treewide`: one root a prompt, forked after its first turn into WIDTH children (default 6), credited by tree_grpo
# with the intra-tree term alone (`trainer.tree_inter_weight=0`): with one tree a prompt both terms compare the same
# leaves, so this is GRPO over the children of one state; the root's first turn is never trained (its advantage is
# 0). `tree2x3`: two roots a prompt, each forked after its first turn into 3 (6 leaves), tree_grpo as the paper
# has it: the first turns are compared across the two trees. For tool_pick, whose first turn (copy the question's
# key) every episode should write alike: 6 leaves spend no more than flat's 4 episodes, the first turn generated
# once a tree. `tree2x3w`: tree2x3 with `trainer.tree_prefix_weight=leaves` (a first turn trained at 3 times its
# advantage, as if once per leaf below it).
# `treeunsure`: two roots a prompt, each forked into 2 at the state before its first turn whose mean surprisal
# reached UNSURE nats (default 0.2; `rollout.tree.entropy` with `rollout.tree.resample_uncertain`: the siblings
# sample that turn again), credited by the recipe's GiGPO: up to flat's 4 leaves a prompt, the turns before the
# fork shared. `treeunsurefill`: treeunsure with `rollout.tree.fill`: a root that never met such a turn ends holding
# two leaves and the tree starts one more episode from the prompt, so a prompt always has flat's 4 leaves (a tree
# whose policy is sure everywhere is flat GiGPO's 4 episodes).
# Usage: RECIPE=gym ARMS="tree gigpo grpo" EXTRA="trainer.steps=16" scripts/tree_comparison.sh OUT_ROOT SEED...
# Each run writes OUT_ROOT/<arm>-seed<S>/metrics.jsonl (ARMS defaults to three arms; EXTRA: overrides for every arm).
set -euo pipefail
out_root=$1; shift
export HF_HUB_OFFLINE=1 LITELLM_LOCAL_MODEL_COST_MAP=True
case ${RECIPE:-gym} in tool_use) eq_tokens=100 ;; tool_choice) eq_tokens=90 ;; *) eq_tokens=6 ;; esac  # `treeeq`'s budget a tree
trees=(rollout.n=1 "rollout.tree.branch_turns=[0,1]" rollout.tree.width=2)  # one tree a prompt, 4 leaves
# tree_grpo with GiGPO's settings back to their defaults (the recipe's are GiGPO's, not tree_grpo's)
tree_grpo=(trainer.advantage=tree_grpo "${trees[@]}" trainer.gigpo_step_weight=1 trainer.gigpo_anchor_scope=group)
# filled trees: flat's 4 leaves a prompt (`treefill` and the arms built on it)
fill_trees=("${tree_grpo[@]}" rollout.tree.fill=true)
# `treeeq`'s trees: 3 first turns each forked into 3, filled, no forks once the tree spent its budget
eq_trees=(rollout.tree.width=3 rollout.tree.fill=true rollout.tree.max_tokens="${TREE_TOKENS:-$eq_tokens}")
# `tree2x3`'s trees: two roots a prompt, each forked after its first turn into 3
pair_trees=(trainer.advantage=tree_grpo rollout.n=2 "rollout.tree.branch_turns=[1]" rollout.tree.width=3)
for seed in "$@"; do
  for arm in ${ARMS:-gigpo grpo tree}; do
    dir="$out_root/$arm-seed$seed"
    [ -f "$dir/report.md" ] && continue
    case $arm in
      gigpo) args=(trainer.advantage=gigpo) ;;
      grpo) args=(trainer.advantage=grpo) ;;
      tree) args=("${tree_grpo[@]}") ;;
      treefill) args=("${fill_trees[@]}") ;;
      treefill2) args=("${fill_trees[@]}" trainer.tree_intra_weight=2 trainer.tree_inter_weight=2) ;;
      treehot) args=("${fill_trees[@]}" rollout.tree.child_temperature="${CHILD_T:-1.5}") ;;
      treehalf) args=("${fill_trees[@]}" trainer.tree_intra_weight=0.5 trainer.tree_inter_weight=0.5) ;;
      treeeq) args=("${tree_grpo[@]}" "${eq_trees[@]}") ;;
      treeeqw) args=("${tree_grpo[@]}" "${eq_trees[@]}" trainer.tree_prefix_weight=leaves) ;;
      treegigpo) args=(trainer.advantage=gigpo "${trees[@]}") ;;
      treewide) args=(trainer.advantage=tree_grpo rollout.n=1 "rollout.tree.branch_turns=[1]"
                      rollout.tree.width="${WIDTH:-6}" trainer.tree_inter_weight=0) ;;
      tree2x3) args=("${pair_trees[@]}") ;;
      tree2x3w) args=("${pair_trees[@]}" trainer.tree_prefix_weight=leaves) ;;
      treeunsure) args=(trainer.advantage=gigpo rollout.n=2 rollout.tree.entropy="${UNSURE:-0.2}"
                        rollout.tree.resample_uncertain=true rollout.tree.max_branch_points=1 rollout.tree.width=2) ;;
      treeunsurefill) args=(trainer.advantage=gigpo rollout.n=2 rollout.tree.entropy="${UNSURE:-0.2}"
                            rollout.tree.resample_uncertain=true rollout.tree.max_branch_points=1
                            rollout.tree.width=2 rollout.tree.fill=true) ;;
      treefillgigpo) args=(trainer.advantage=gigpo "${trees[@]}" rollout.tree.fill=true) ;;
    esac
    rm -rf "$dir" # an arm that did not finish (no report) runs again from the start: a new run refuses its results
    .venv/bin/agentrl train recipe="${RECIPE:-gym}" rollout.seed="$seed" output_dir="$dir" "${args[@]}" ${EXTRA:-} \
      > "$out_root/$arm-seed$seed.log" 2>&1 || echo "$arm seed $seed failed (see its log)"
  done
done
