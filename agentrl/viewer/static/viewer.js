// agentrl trajectory viewer: reads the JSON inlined in the page and renders runs → steps → groups → trajectories.
"use strict";
(function () {
  const DATA = JSON.parse(document.getElementById("agentrl-data").textContent);
  const $ = (selector, root) => (root || document).querySelector(selector);
  const state = { selected: null, colorBy: "mask", visible: [], open: new Set() };

  // el("div", {class: "x", text: "y", title: "z", data: {k: v}, on: {click: f}}, child, ...)
  function el(tag, attrs, ...children) {
    const node = document.createElement(tag);
    for (const [key, value] of Object.entries(attrs || {})) {
      if (value === undefined || value === null) continue;
      if (key === "text") node.textContent = value;
      else if (key === "data") Object.entries(value).forEach(([k, v]) => (node.dataset[k] = v));
      else if (key === "on") Object.entries(value).forEach(([k, v]) => node.addEventListener(k, v));
      else if (key === "style") node.style.cssText = value;
      else node.setAttribute(key, value);
    }
    for (const child of children.flat(Infinity)) {
      if (child === null || child === undefined || child === false) continue;
      node.append(child instanceof Node ? child : document.createTextNode(String(child)));
    }
    return node;
  }

  function fmt(x, digits) {
    if (x === null || x === undefined) return "–";
    if (typeof x === "number") return Number.isInteger(x) ? String(x) : x.toFixed(digits === undefined ? 3 : digits);
    return typeof x === "string" ? x : JSON.stringify(x);
  }
  const stopOf = (t) => t.stop || "none";
  const agentOf = (t) => t.agent || "(none)";
  const mean = (xs) => (xs.length ? xs.reduce((a, b) => a + b, 0) / xs.length : null);
  const meanReward = (idx) => mean(idx.map((i) => DATA.trajs[i].reward).filter((r) => r !== null));
  const unique = (xs) => [...new Set(xs)].sort();

  // ---- filters -------------------------------------------------------------------------------------------
  function initFilters() {
    const stops = $("#filter-stop");
    for (const reason of unique(DATA.trajs.map(stopOf))) {
      const n = DATA.trajs.filter((t) => stopOf(t) === reason).length;
      stops.append(el("label", {}, el("input", { type: "checkbox", value: reason, checked: "" }), ` ${reason} (${n})`));
    }
    const agents = $("#filter-agent");
    for (const agent of unique(DATA.trajs.map(agentOf))) agents.append(el("option", { value: agent, text: agent }));
    for (const input of document.querySelectorAll("#filters input, #filters select")) {
      input.addEventListener("input", applyFilters);
      input.addEventListener("change", applyFilters);
    }
    $("#filter-reset").addEventListener("click", () => {
      for (const input of document.querySelectorAll("#filters input")) {
        if (input.type === "checkbox") input.checked = input.closest("#filter-stop") !== null;
        else input.value = "";
      }
      $("#filter-agent").value = "";
      applyFilters();
    });
  }

  function readFilters() {
    const number = (id) => ($(id).value.trim() === "" ? null : Number($(id).value));
    return {
      min: number("#filter-reward-min"),
      max: number("#filter-reward-max"),
      stops: new Set([...document.querySelectorAll("#filter-stop input:checked")].map((i) => i.value)),
      agent: $("#filter-agent").value,
      task: $("#filter-task").value.trim().toLowerCase(),
      drift: $("#filter-drift").checked,
      error: $("#filter-error").checked,
    };
  }

  function firstUserText(t) {
    const user = t.messages.find((m) => m.role === "user");
    return user ? user.parts.filter((p) => p.type === "text").map((p) => p.text).join(" ") : "";
  }

  function matches(t, f) {
    if ((f.min !== null || f.max !== null) && t.reward === null) return false;
    if (f.min !== null && t.reward < f.min) return false;
    if (f.max !== null && t.reward > f.max) return false;
    if (!f.stops.has(stopOf(t))) return false;
    if (f.agent && agentOf(t) !== f.agent) return false;
    if (f.drift && !t.drift) return false;
    if (f.error && !t.error) return false;
    if (f.task) {
      const haystack = [t.sample_id, t.data_source, t.group, t.id, firstUserText(t)].map((x) => String(x || ""));
      if (!haystack.some((s) => s.toLowerCase().includes(f.task))) return false;
    }
    return true;
  }

  function applyFilters() {
    const f = readFilters();
    state.visible = DATA.trajs.map((t) => matches(t, f));
    const shown = state.visible.filter(Boolean).length;
    $("#shown-count").textContent = `${shown} of ${DATA.trajs.length} trajectories shown`;
    renderTree();
  }

  // ---- tree ----------------------------------------------------------------------------------------------
  // A <details> whose children (a function returning nodes) are built only once it is opened: a long run's
  // closed steps cost one element each.
  function foldable(key, summary, defaultOpen, children) {
    const node = el("details", { data: { key } }, el("summary", {}, summary));
    let built = false;
    const build = () => {
      if (!built) node.append(...[children()].flat(Infinity).filter(Boolean));
      built = true;
    };
    if (state.open.has(key) || (defaultOpen && !state.open.has("closed:" + key))) {
      build();
      node.open = true;
    }
    node.addEventListener("toggle", () => {
      if (node.open) build();
      state.open.delete(node.open ? "closed:" + key : key);
      state.open.add(node.open ? key : "closed:" + key);
    });
    return node;
  }

  function trajRow(i) {
    const t = DATA.trajs[i];
    return el(
      "button",
      {
        type: "button",
        class: "traj-row" + (i === state.selected ? " selected" : ""),
        data: { index: i, trajId: t.id },
        title: `trajectory ${t.id}`,
        on: { click: () => select(i) },
      },
      el("span", { class: "r", text: `r=${fmt(t.reward, 2)}` }),
      el("span", { class: `badge stop-${stopOf(t)}`, text: stopOf(t) }),
      el("span", { text: `#${t.sample_index} · ${t.turns} turns` }),
      t.tree_at !== undefined
        ? el("span", { class: "badge tree-path", title: "leaf of a tree rollout: its branch at each fork", text: `tree ${treePath(t)}` })
        : null,
      t.drift ? el("span", { class: "badge drift", text: "drift" }) : null,
      t.error ? el("span", { class: "badge stop-error", text: "error" }) : null,
      t.failed
        ? el("span", { class: "badge stop-error", text: "not trained", title: "infrastructure failure" })
        : null
    );
  }

  function renderTree() {
    const tree = $("#tree");
    tree.replaceChildren();
    DATA.runs.forEach((run, ri) => {
      const stepNodes = [];
      run.steps.forEach((step, si) => {
        const groups = step.groups
          .map((group) => ({ id: group.id, idx: group.trajs.filter((i) => state.visible[i]) }))
          .filter((group) => group.idx.length);
        const shown = groups.flatMap((group) => group.idx);
        if (!shown.length) return;
        const groupNodes = () =>
          groups.map(({ id, idx }) => {
            const label = id.length > 14 ? id.slice(0, 12) + "…" : id;
            const meta = el("span", { class: "meta", text: ` · ${idx.length} · mean r=${fmt(meanReward(idx), 2)}` });
            const node = foldable(`g:${ri}:${si}:${id}`, [`group ${label}`, meta], true, () => idx.map(trajRow));
            node.classList.add("group");
            return node;
          });
        const lastStep = si === run.steps.length - 1;
        const meta = el("span", { class: "meta", text: ` · ${shown.length} trajs · mean r=${fmt(meanReward(shown), 2)}` });
        const node = foldable(`s:${ri}:${si}`, [step.name, meta], run.steps.length <= 3 || lastStep, groupNodes);
        node.classList.add("step");
        stepNodes.push(node);
      });
      const node = foldable(`r:${ri}`, [el("strong", { text: run.name }), ` (${run.steps.length} steps)`], true, () => stepNodes);
      node.classList.add("run");
      tree.append(node);
    });
  }

  // ---- tree rollouts -------------------------------------------------------------------------------------
  const treePath = (t) => (t.metadata.tree.path.length ? t.metadata.tree.path.join("·") : "root");
  const samePath = (a, b) => a.length === b.length && a.every((x, k) => x === b[k]);

  // The tree a leaf belongs to, drawn as nested boxes: each node's turns, outcome (mean reward of the leaves
  // below) and advantage; the children of a branch point side by side; a leaf links to its trajectory.
  function treeSection(t) {
    if (t.tree_at === undefined) return null;
    const tree = DATA.runs[t.run].steps[t.step].trees[t.tree_at];
    const childrenOf = (path) => tree.nodes.filter((n) => n.path.length === path.length + 1 && samePath(n.path.slice(0, -1), path));
    const turns = ([start, end]) => {
      if (end !== null && end <= start) return "no turns";
      return end === start + 1 ? `turn ${end}` : `turns ${start + 1}–${end === null ? "…" : end}`;
    };
    function box(node) {
      const mine = node.leaf !== null && DATA.trajs[node.leaf].id === t.id;
      const head = [
        el("span", { class: "node-name", text: node.path.length ? `branch ${node.path.join("·")}` : "root" }),
        el("span", { text: ` · ${turns(node.turns)}` }),
        el("span", { class: "node-value", text: ` · V=${fmt(node.value, 2)}` }),
        el("span", { class: "node-adv", text: ` · A=${fmt(node.advantage, 2)}` }),
      ];
      const leaf =
        node.leaf === null
          ? null
          : el("button", { type: "button", class: "tree-leaf", on: { click: () => select(node.leaf) } }, `r=${fmt(DATA.trajs[node.leaf].reward, 2)} · ${stopOf(DATA.trajs[node.leaf])}`);
      const kids = childrenOf(node.path);
      return el(
        "div",
        { class: "tree-node" + (mine ? " current" : ""), data: { path: node.path.join(".") } },
        el("div", { class: "node-head" }, head, leaf),
        kids.length ? el("div", { class: "tree-children" }, kids.map(box)) : null
      );
    }
    const root = tree.nodes.find((n) => n.path.length === 0);
    const leaves = tree.nodes.filter((n) => n.leaf !== null).length;
    return [
      el("h3", { text: `Tree rollout (${leaves} leaves)` }),
      el("p", { class: "section-note", text: "V: the mean reward of the leaves below a node. A: its tree_grpo advantage (– when the run used another estimator). Forks copy the episode's state; siblings start from one true state." }),
      el("div", { class: "tree-view", id: "tree-view" }, box(root)),
    ];
  }

  // ---- detail --------------------------------------------------------------------------------------------
  function select(i) {
    state.selected = i;
    const stepKey = `s:${DATA.trajs[i].run}:${DATA.trajs[i].step}`;
    if (state.visible[i] && !document.querySelector(`.traj-row[data-index="${i}"]`)) {
      state.open.delete("closed:" + stepKey); // a link to a trajectory in a folded step unfolds it
      state.open.add(stepKey);
      renderTree();
    }
    for (const row of document.querySelectorAll(".traj-row.selected")) row.classList.remove("selected");
    for (const row of document.querySelectorAll(`.traj-row[data-index="${i}"]`)) row.classList.add("selected");
    history.replaceState(null, "", "#t=" + encodeURIComponent(DATA.trajs[i].id));
    renderDetail(DATA.trajs[i]);
  }

  function fieldList(pairs) {
    return el("dl", { class: "fields" }, pairs.map(([k, v]) => [el("dt", { text: k }), el("dd", {}, v)]));
  }

  function kvTable(id, obj, header) {
    const rows = Object.entries(obj || {});
    if (!rows.length) return el("p", { class: "section-note", text: "none" });
    return el(
      "table",
      { class: "kv", id },
      header ? el("tr", {}, header.map((h) => el("th", { text: h }))) : null,
      rows.map(([k, v]) => el("tr", {}, el("td", { text: k }), el("td", { class: "num", text: fmt(v) })))
    );
  }

  // A component's details as JSON, except multi-line texts (a verifier's test output, a log), each shown as
  // itself under its name: JSON would fold them into one line of \n escapes.
  function detailsView(details) {
    const isText = (v) => typeof v === "string" && v.includes("\n");
    if (details === null || typeof details !== "object" || Array.isArray(details)) {
      return el("pre", { text: JSON.stringify(details, null, 2) });
    }
    const entries = Object.entries(details);
    const rest = Object.fromEntries(entries.filter(([, v]) => !isText(v)));
    return [
      el("pre", { text: JSON.stringify(rest, null, 2) }),
      entries
        .filter(([, v]) => isText(v))
        .map(([k, v]) => el("div", { class: "detail-text", data: { detail: k } }, el("div", { class: "section-note", text: k }), el("pre", { text: v }))),
    ];
  }

  function rewardTable(t) {
    const names = unique([...Object.keys(t.components || {}), ...Object.keys(t.details || {})]);
    const rows = names.map((name) => {
      const details = t.details ? t.details[name] : undefined;
      const detailNode = details === undefined ? "" : el("details", {}, el("summary", { text: "details" }), detailsView(details));
      return el(
        "tr",
        { data: { component: name } },
        el("td", { text: name }),
        el("td", { class: "num", text: name in (t.components || {}) ? fmt(t.components[name]) : "failed / skipped" }),
        el("td", {}, detailNode)
      );
    });
    const policyRows = Object.entries(t.policy_rewards || {}).map(([name, value]) =>
      el("tr", { data: { policy: name } }, el("td", { text: `policy ${name}` }), el("td", { class: "num", text: fmt(value) }), el("td"))
    );
    return el(
      "table",
      { class: "kv", id: "reward-components" },
      el("tr", {}, el("th", { text: "component" }), el("th", { text: "score" }), el("th", { text: "details" })),
      rows,
      policyRows,
      el("tr", { class: "total" }, el("td", {}, el("strong", { text: "reward" })), el("td", { class: "num", text: fmt(t.reward) }), el("td"))
    );
  }

  function driftBox(drift) {
    if (!drift) return null;
    const text = drift.message
      ? `Drift: ${drift.message}`
      : `Drift: ${drift.kind || ""} drift at token ${fmt(drift.position)} — re-rendering the messages gives ` +
        `${JSON.stringify(drift.expected || "")}, the trajectory has ${JSON.stringify(drift.actual || "")}. ` +
        "The trained tokens differ from what the chat template produces for these messages.";
    return el("div", { class: "drift-warning", role: "alert" }, "⚠ ", text);
  }

  function partNode(part) {
    if (part.type === "text") return el("pre", { class: "msg-text", text: part.text });
    if (part.type === "tool_call") {
      return el(
        "div",
        { class: "tool-call" + (part.malformed ? " malformed" : ""), data: { tool: part.name } },
        el("span", { class: "tool-name", text: part.malformed ? "malformed tool call" : `→ ${part.name}` }),
        part.id ? el("span", { class: "section-note", text: ` (${part.id})` }) : null,
        el("pre", { class: "tool-args", text: part.arguments })
      );
    }
    if (part.type === "image") {
      if (part.missing) return el("p", { class: "error-box", text: `image not found: ${part.missing}` });
      return el("img", { src: part.src, alt: "screenshot", loading: "lazy" });
    }
    return el("pre", { text: JSON.stringify(part) });
  }

  function messageNode(m, index) {
    const head = [m.role];
    if (m.name) head.push(`· ${m.name}`);
    if (m.policy) head.push(`· policy ${m.policy}`);
    if (m.tool_call_id) head.push(`· call ${m.tool_call_id}`);
    return el(
      "div",
      { class: `msg msg-${m.role}`, data: { index } },
      el("div", { class: "msg-head", text: head.join(" ") }),
      el("div", { class: "msg-body" }, m.parts.map(partNode))
    );
  }

  function tokenText(seg, k) {
    if (!seg.text) return `[${seg.ids[k]}]`;
    return seg.text[k].replace(/\n/g, "↵\n");
  }

  function tokenNode(seg, k) {
    const lp = seg.lp ? seg.lp[k] : null;
    const tip = [`id ${seg.ids[k]}`, seg.trainable ? "trainable" : "not trained (context)", `role ${seg.role}`];
    if (lp !== null && lp !== undefined) tip.push(`logprob ${lp.toFixed(4)} (p=${Math.exp(lp).toFixed(3)})`);
    if (seg.version !== null && seg.version !== undefined) tip.push(`policy v${seg.version}`);
    const cls = "tok " + (seg.trainable ? "trainable" : "context") + (seg.text ? "" : " id");
    const node = el("span", { class: cls, title: tip.join(" · "), text: tokenText(seg, k) });
    if (lp !== null && lp !== undefined) {
      node.dataset.logprob = lp;
      if (state.colorBy === "logprob") node.style.background = `hsl(${Math.round(120 * Math.exp(lp))}, 75%, 78%)`;
    }
    return node;
  }

  function tokenView(segments, id) {
    const view = el("div", { class: "token-view" + (state.colorBy === "logprob" ? " by-logprob" : ""), id });
    for (const seg of segments) {
      const segNode = el("span", {
        class: "seg " + (seg.trainable ? "seg-trainable" : "seg-context"),
        data: { role: seg.role },
      });
      for (let k = 0; k < seg.ids.length; k++) segNode.append(tokenNode(seg, k));
      view.append(segNode);
    }
    return view;
  }

  // The compaction (agent.context) that started step sample k (0-based), as a note, or null
  function compactionNote(t, k) {
    const records = ((t.metadata || {}).context || {}).compactions || [];
    const c = records.find((r) => r.step_sample === k);
    if (!c) return null;
    const text = `Context compacted by ${c.strategy} after turn ${c.turn}: ${c.tokens_before} → ${c.tokens_after} tokens`;
    return el("p", { class: "compaction-note", text });
  }

  // Earlier step samples (the loop rewrote its context after each), in order, before the last one.
  function earlierStepSections(t) {
    const earlier = t.earlier_steps || [];
    const total = earlier.length + 1;
    return earlier.map((sample, k) =>
      el(
        "section",
        { class: "step-sample", data: { sample: k + 1 } },
        compactionNote(t, k),
        el("h3", { text: `Step sample ${k + 1} of ${total}: conversation (${sample.messages.length} messages)` }),
        el("div", { class: "conversation" }, sample.messages.map(messageNode)),
        el("h3", { text: `Step sample ${k + 1} of ${total}: tokens (${sample.segments.length} segments)` }),
        tokenView(sample.segments, `token-view-${k + 1}`)
      )
    );
  }

  // "Conversation (…)", or "Step sample 3 of 3: conversation (…)" after earlier step samples
  function lastSampleHeading(t, what) {
    const n = (t.earlier_steps || []).length + 1;
    return n > 1 ? `Step sample ${n} of ${n}: ${what}` : what.charAt(0).toUpperCase() + what.slice(1);
  }

  function tokenSection(t) {
    const view = tokenView(t.segments, "token-view");
    const colorBy = el(
      "select",
      { id: "color-by", on: { change: (e) => { state.colorBy = e.target.value; renderDetail(t); } } },
      el("option", { value: "mask", text: "trainable mask" }),
      el("option", { value: "logprob", text: "logprob (red = unlikely, green = likely)" })
    );
    colorBy.value = state.colorBy;
    const legend = el(
      "span",
      { class: "legend" },
      el("span", { class: "swatch-trainable", text: "trainable (generated)" }),
      el("span", { class: "swatch-context", text: "not trained (prompt, tool output, observations)" })
    );
    const controls = el("div", { class: "token-controls" }, el("label", {}, "color by ", colorBy), legend);
    return [controls, el("p", { class: "section-note", text: DATA.token_note }), view];
  }

  function renderDetail(t) {
    const run = DATA.runs[t.run];
    const step = run.steps[t.step];
    const main = $("#detail");
    const content = el(
      "article",
      { class: "trajectory", data: { trajId: t.id } },
      el("h2", { class: "traj-title", text: `trajectory ${t.id}` }),
      driftBox(t.drift),
      t.error ? el("div", { class: "error-box", text: `error: ${t.error}` }) : null,
      fieldList([
        ["run / step", `${run.name} / ${step.name}`],
        ["group", t.group || "–"],
        ["sample", `id ${fmt(t.sample_id)} · index ${t.sample_index} · source ${fmt(t.data_source)}`],
        ["loop kind", t.agent || "–"],
        ["reward", el("strong", { id: "reward-total", text: fmt(t.reward) })],
        ["stop reason", el("span", { class: `badge stop-${stopOf(t)}`, id: "stop-reason", text: stopOf(t) })],
        ["turns", fmt(t.turns)],
        ["tokens", `${t.num_generated} generated (trainable) of ${t.num_tokens}`],
      ]),
      el("h3", { text: "Reward components" }),
      rewardTable(t),
      treeSection(t),
      el("h3", { text: "Timings (s)" }),
      kvTable("timings", t.timings),
      ...earlierStepSections(t),
      compactionNote(t, (t.earlier_steps || []).length),
      el("h3", { text: lastSampleHeading(t, `conversation (${t.messages.length} messages)`) }),
      el("div", { id: "conversation" }, t.messages.map(messageNode)),
      el("h3", { text: lastSampleHeading(t, `tokens (${t.segments.length} segments)`) }),
      tokenSection(t),
      el("h3", { text: "Trajectory metrics" }),
      kvTable("traj-metrics", t.metrics),
      step.metrics ? el("details", {}, el("summary", { text: `${step.name} metrics` }), kvTable("step-metrics", step.metrics)) : null,
      el("details", {}, el("summary", { text: "metadata" }), el("pre", { text: JSON.stringify(t.metadata, null, 2) }))
    );
    main.replaceChildren(content);
  }

  function moveSelection(delta) {
    const order = [...document.querySelectorAll(".traj-row")].map((r) => Number(r.dataset.index));
    if (!order.length) return;
    const at = order.indexOf(state.selected);
    select(order[Math.min(Math.max(at + delta, 0), order.length - 1)]);
  }

  function init() {
    const total = DATA.trajs.length;
    const drifted = DATA.trajs.filter((t) => t.drift).length;
    $("#summary").textContent =
      `${DATA.runs.length} run(s) · ${total} trajectories` + (drifted ? ` · ⚠ ${drifted} with drift` : "");
    $("#token-note").textContent = DATA.token_note;
    const warnings = DATA.runs.flatMap((r) => r.warnings.map((w) => `${r.name}: ${w}`));
    $("#warnings").replaceChildren(...warnings.map((w) => el("div", { text: w })));
    initFilters();
    applyFilters();
    document.addEventListener("keydown", (e) => {
      if (e.target.matches("input, select, textarea")) return;
      if (e.key === "j") moveSelection(1);
      if (e.key === "k") moveSelection(-1);
    });
    window.addEventListener("hashchange", () => {
      const index = hashIndex();
      if (index >= 0 && index !== state.selected) select(index);
    });
    const index = hashIndex();
    if (index >= 0) select(index);
    else if (total) select(0);
  }

  // `#t=<trajectory id>` links to a trajectory
  function hashIndex() {
    const wanted = decodeURIComponent((location.hash.match(/^#t=(.+)$/) || [])[1] || "");
    return DATA.trajs.findIndex((t) => t.id === wanted);
  }

  init();
})();
