// The rsc web console (SPEC O3, docs/console.md): a read-only, live view of the coordinator's
// groups, members, shards, correction rounds and reshard progress, drawn from the admin read
// endpoints. Plain JavaScript for current browsers (ES2019, DOM replaceChildren), no
// framework, no build step.
//
// Rules this file keeps:
// - Everything that comes from the server (member ids, names, error messages) reaches the
//   page as text (textContent / Node.append of strings, setAttribute), never as HTML.
// - The token lives in sessionStorage (gone when the tab closes), is sent only as
//   `Authorization: Bearer <token>` to this origin, and is never put in a URL the page makes.
//   `#token=…` in the address is accepted for automation and removed from it at once.
// - A failed refresh keeps the last good data on screen, marked stale, with the error above
//   it; only a 401/403 clears it (access was refused).
'use strict';

(function () {
  const TOKEN_KEY = 'rsc.console.token';
  const REQUEST_TIMEOUT_MS = 10000;
  // The group list fetches each group's view for its summary; past this many groups only
  // the names are listed (each view reads every shard's backlog from Redis).
  const MAX_SUMMARIES = 50;
  const SUMMARY_CONCURRENCY = 4;
  const STATES = ['ASSIGNED', 'DRAINING', 'UNASSIGNED', 'WAITING_PARENTS', 'COMPLETED'];

  const state = {
    token: '',
    route: { view: 'groups' },
    intervalSec: 5,
    paused: false,
    timer: null,
    seq: 0,           // bumps on every refresh; an answer to an older one is dropped
    loads: 0,         // successful refreshes so far (shown as <body data-loads>, for tests)
    last: null,       // { route, data, at: Date } of the last good load
    error: null,      // the last refresh's error, or null
    shardFilter: '',  // a state, or '' for every shard
    configOpen: false,
  };

  const $ = (id) => document.getElementById(id);

  // ── DOM helpers: text only ───────────────────────────────────────────────────────────
  function h(tag, props, ...children) {
    const e = document.createElement(tag);
    for (const [k, v] of Object.entries(props || {})) {
      if (v === undefined || v === null || v === false) continue;
      if (k === 'class') e.className = v;
      else if (k === 'data') for (const [dk, dv] of Object.entries(v)) e.dataset[dk] = String(dv);
      else if (k.startsWith('on')) e.addEventListener(k.slice(2), v);
      else e.setAttribute(k, v === true ? '' : String(v));
    }
    for (const c of children.flat(Infinity)) {
      if (c === null || c === undefined || c === false) continue;
      e.append(c instanceof Node ? c : String(c));  // a string becomes a text node
    }
    return e;
  }

  // A header is aligned like its column's cells (numbers to the right).
  function table(headers, rows, props) {
    const first = rows.length ? rows[0].children : [];
    const th = headers.map((t, i) =>
      h('th', { class: first[i] && first[i].classList.contains('num') ? 'num' : null }, t));
    return h('table', props, h('thead', null, h('tr', null, th)), h('tbody', null, rows));
  }

  // ── formatting ─────────────────────────────────────────────────────────────────────────
  const dash = '–';
  const num = (n) => (typeof n === 'number' ? n.toLocaleString('en-US') : dash);

  function duration(ms) {
    if (typeof ms !== 'number') return dash;
    if (ms < 1000) return ms + ' ms';
    const s = ms / 1000;
    if (s < 60) return s.toFixed(s < 10 ? 1 : 0) + ' s';
    const m = Math.floor(s / 60);
    if (m < 60) return m + ' min ' + Math.floor(s % 60) + ' s';
    return Math.floor(m / 60) + ' h ' + (m % 60) + ' min';
  }

  const clock = (d) => d.toLocaleTimeString('en-GB', { hour12: false });

  // [0,1,2,5,7,8] -> "0-2, 5, 7-8" (as `rsc describe` prints them).
  function ranges(ids) {
    if (!ids || ids.length === 0) return dash;
    const s = ids.slice().sort((a, b) => a - b);
    const out = [];
    for (let i = 0; i < s.length;) {
      let j = i;
      while (j + 1 < s.length && s[j + 1] === s[j] + 1) j++;
      out.push(j > i ? s[i] + '-' + s[j] : String(s[i]));
      i = j + 1;
    }
    return out.join(', ');
  }

  const badge = (text, kind) => h('span', { class: 'badge ' + kind }, text);
  const stateBadge = (s) => badge(s || '?', 'state-' + String(s || 'unknown').toLowerCase());

  // ── the address: #group=<stream>/<group>&refresh=<s>&token=<t> ────────────────────────
  function parseFragment() {
    const params = {};
    for (const part of location.hash.replace(/^#/, '').split('&')) {
      if (!part) continue;
      const eq = part.indexOf('=');
      const key = eq < 0 ? part : part.slice(0, eq);
      try {
        params[key] = eq < 0 ? '' : decodeURIComponent(part.slice(eq + 1));
      } catch (e) {
        params[key] = '';  // malformed escape: ignored
      }
    }
    return params;
  }

  function readAddress() {
    const params = parseFragment();
    if ('token' in params) {
      // For automation (docs/console.md): taken into the session, then removed from the
      // address bar and the history, so it is not bookmarked or shared by accident.
      setToken(params.token);
      delete params.token;
      const rest = Object.entries(params)
        .map(([k, v]) => k + '=' + encodeURIComponent(v)).join('&');
      history.replaceState(null, '', location.pathname + location.search + (rest ? '#' + rest : ''));
    }
    const seconds = Number(params.refresh);
    if (Number.isFinite(seconds) && seconds >= 1 && seconds <= 3600) {
      state.intervalSec = seconds;
      if (![...$('interval').options].some((o) => Number(o.value) === seconds)) {
        $('interval').append(h('option', { value: seconds }, seconds + ' s'));
      }
      $('interval').value = String(seconds);
    }
    const g = params.group || '';
    const slash = g.indexOf('/');
    state.route = slash > 0 && slash < g.length - 1
      ? { view: 'group', stream: g.slice(0, slash), group: g.slice(slash + 1) }
      : { view: 'groups' };
  }

  const groupHref = (stream, group) => '#group=' + encodeURIComponent(stream + '/' + group);

  // ── the API ────────────────────────────────────────────────────────────────────────────
  class ApiError extends Error {
    constructor(status, code, message) {
      super(message);
      this.status = status;
      this.code = code;
    }
  }

  // Relative to /ui/, so a proxy that mounts the coordinator under a prefix keeps working.
  async function api(path) {
    const headers = { Accept: 'application/json' };
    if (state.token) headers.Authorization = 'Bearer ' + state.token;
    const ctl = new AbortController();
    const timer = setTimeout(() => ctl.abort(), REQUEST_TIMEOUT_MS);
    let res;
    try {
      res = await fetch('../' + path, {
        headers, signal: ctl.signal, cache: 'no-store', credentials: 'omit',
      });
    } catch (e) {
      throw new ApiError(0, 'UNREACHABLE', e.name === 'AbortError'
        ? 'no answer within ' + REQUEST_TIMEOUT_MS / 1000 + ' s'
        : 'the coordinator cannot be reached (' + e.message + ')');
    } finally {
      clearTimeout(timer);
    }
    let body = null;
    try {
      body = await res.json();
    } catch (e) {
      body = null;
    }
    if (!res.ok) {
      throw new ApiError(res.status, (body && body.error) || 'HTTP_' + res.status,
                         (body && body.message) || res.statusText);
    }
    return body;
  }

  const seg = encodeURIComponent;

  async function loadGroups() {
    const list = (await api('v1/groups')).groups || [];
    const summaries = new Array(list.length).fill(null);
    let next = 0;
    async function worker() {
      while (next < Math.min(list.length, MAX_SUMMARIES)) {
        const i = next++;
        try {
          summaries[i] = { view: await api('v1/groups/' + seg(list[i].stream) + '/' +
                                           seg(list[i].group)) };
        } catch (e) {
          if (e.status === 401 || e.status === 403) throw e;
          summaries[i] = { error: e };
        }
      }
    }
    await Promise.all(Array.from({ length: SUMMARY_CONCURRENCY }, worker));
    return { list, summaries };
  }

  async function loadGroup(stream, group) {
    const [view, streamView] = await Promise.all([
      api('v1/groups/' + seg(stream) + '/' + seg(group)),
      // The stream's layout (reshard progress). Not fatal: the group view stands alone.
      api('v1/streams/' + seg(stream)).catch((e) => {
        if (e.status === 401 || e.status === 403) throw e;
        return { error: e };
      }),
    ]);
    return { view, stream: streamView, fetchedAt: Date.now() };
  }

  // ── derived figures ────────────────────────────────────────────────────────────────────
  function totals(view) {
    // Keyed by values from the server: no prototype (a member may be called "__proto__").
    const t = { lag: 0, pending: 0, oldest: 0, unknownLag: 0, byState: Object.create(null) };
    for (const s of view.shards || []) {
      if (typeof s.lag === 'number') t.lag += s.lag; else t.unknownLag++;
      if (typeof s.pending === 'number') t.pending += s.pending;
      if (typeof s.oldestPendingMs === 'number') t.oldest = Math.max(t.oldest, s.oldestPendingMs);
      t.byState[s.state] = (t.byState[s.state] || 0) + 1;
    }
    return t;
  }

  const isLive = (m) => m.leaseRemainingMs > 0 && !m.fenced;

  function stateChips(byState) {
    const known = STATES.filter((s) => byState[s]);
    const other = Object.keys(byState).filter((s) => !STATES.includes(s)).sort();
    return h('span', { class: 'chips' }, known.concat(other).map(
      (s) => h('span', { class: 'chip', data: { state: s } }, stateBadge(s), ' ', byState[s])));
  }

  // ── views ──────────────────────────────────────────────────────────────────────────────
  function renderGroups(data) {
    if (data.list.length === 0) {
      return [h('h2', null, 'Groups'),
              h('p', { class: 'muted', id: 'no-groups' },
                'No groups yet. Create one with: rsc create <stream> <group> --shards N')];
    }
    const rows = data.list.map((g, i) => {
      const s = data.summaries[i];
      const key = g.stream + '/' + g.group;
      const link = h('a', { href: groupHref(g.stream, g.group) }, g.group);
      if (!s) {
        return h('tr', { data: { group: key } }, h('td', null, g.stream), h('td', null, link),
                 h('td', { colspan: 6, class: 'muted' }, 'not summarised (over ' + MAX_SUMMARIES +
                   ' groups): open the group'));
      }
      if (s.error) {
        return h('tr', { data: { group: key }, class: 'row-error' }, h('td', null, g.stream),
                 h('td', null, link), h('td', { colspan: 6 }, badge(s.error.code, 'error'), ' ',
                   s.error.message));
      }
      const v = s.view;
      const t = totals(v);
      const live = (v.members || []).filter(isLive).length;
      return h('tr', { data: { group: key } },
        h('td', null, g.stream), h('td', null, link),
        h('td', { class: 'num revision' }, num(v.revision)),
        h('td', { class: 'num members' }, live === v.members.length
          ? String(live) : live + ' live / ' + v.members.length),
        h('td', { class: 'num shards' }, num((v.shards || []).length)),
        h('td', { class: 'num lag' }, num(t.lag), t.unknownLag ? '+?' : ''),
        h('td', { class: 'num pending' }, num(t.pending)),
        h('td', null, stateChips(t.byState),
          v.correctionRound ? badge('correction round #' + v.correctionRound.id, 'warn') : ''));
    });
    return [
      h('h2', null, 'Groups ', h('span', { class: 'muted' }, '(' + data.list.length + ')')),
      table(['Stream', 'Group', 'Revision', 'Members', 'Shards', 'Lag', 'Pending', 'Shard states'],
            rows, { id: 'groups', class: 'grid' }),
    ];
  }

  function renderSummary(v, t) {
    const live = (v.members || []).filter(isLive).length;
    const card = (label, value, cls) =>
      h('div', { class: 'card ' + (cls || '') }, h('div', { class: 'label' }, label),
        h('div', { class: 'value' }, value));
    return h('section', { id: 'summary' },
      h('div', { class: 'cards' },
        card('Members', live === v.members.length ? String(live) : live + ' live / ' +
             v.members.length, 'members'),
        card('Shards', num((v.shards || []).length), 'shards'),
        card('Lag', [num(t.lag), t.unknownLag ? h('small', { title: 'shards whose lag Redis ' +
             'cannot tell' }, ' +' + t.unknownLag + ' unknown') : ''], 'lag'),
        card('Pending', num(t.pending), 'pending'),
        card('Oldest pending', t.pending ? duration(t.oldest) : dash, 'oldest'),
        card('Shard states', stateChips(t.byState), 'states')),
      h('p', { class: 'facts' },
        'revision ', h('b', { id: 'revision' }, num(v.revision)),
        ' · metadata version ', h('b', null, num(v.metadataVersion)),
        ' · assignment epoch ', h('b', null, num(v.assignmentEpoch)),
        ' · shard count ', h('b', null, num(v.shardCount)),
        ' · lineage ', h('code', { title: v.lineage }, (v.lineage || dash).slice(0, 12))),
      renderConfig(v.config || {}));
  }

  function renderConfig(config) {
    const d = h('details', { id: 'config', open: state.configOpen },
      h('summary', null, 'Config'),
      h('dl', null, Object.entries(config).map(([k, val]) =>
        [h('dt', null, k), h('dd', null, num(val) + (k.endsWith('Ms') ? ' ms' : ''))])));
    d.addEventListener('toggle', () => { state.configOpen = d.open; });
    return d;
  }

  function renderMembers(v, fetchedAt) {
    const owned = Object.create(null);
    for (const s of v.shards || []) if (s.owner) owned[s.owner] = (owned[s.owner] || 0) + 1;
    const leaseMs = (v.config && v.config.memberLeaseMs) || 0;
    const rows = (v.members || []).map((m) => {
      const left = Math.max(0, m.leaseRemainingMs || 0);
      const share = leaseMs ? Math.min(1, left / leaseMs) : 0;
      const flags = [m.fenced ? badge('fenced', 'bad') : '', m.leaving ? badge('leaving', 'warn') : '',
                     left === 0 ? badge('expired', 'bad') : ''];
      // Sized through the CSSOM, which the CSP allows (a style attribute it would not).
      const fill = h('span', { class: 'fill' + (share < 0.3 ? ' low' : '') });
      fill.style.width = (share * 100).toFixed(0) + '%';
      return h('tr', { data: { member: m.memberId } },
        h('td', { class: 'member' }, m.memberId),
        h('td', { class: 'num epoch' }, num(m.memberEpoch)),
        h('td', { class: 'instance' }, m.instanceId || dash),
        h('td', { class: 'num owned' }, num(owned[m.memberId] || 0)),
        h('td', { class: 'assigned' }, ranges(m.assignedShards)),
        h('td', { class: 'pendingShards' }, ranges(m.pendingShards)),
        h('td', { class: 'revoking' }, ranges(m.revokingShards)),
        h('td', { class: 'lease' },
          h('span', { class: 'leasebar', title: leaseMs ? 'of memberLeaseMs ' + leaseMs + ' ms' : null },
            fill),
          ' ', duration(left)),
        h('td', { class: 'deadline' }, left ? clock(new Date(fetchedAt + left)) : dash),
        h('td', null, flags));
    });
    const body = rows.length
      ? table(['Member', 'Epoch', 'Instance', 'Owns', 'Assigned', 'Pending', 'Revoking',
               'Lease left', 'Deadline (local)', 'Flags'], rows, { id: 'members', class: 'grid' })
      : h('p', { class: 'muted', id: 'members' }, 'No members: nobody has joined (or all expired).');
    return h('section', null, h('h3', null, 'Members ',
      h('span', { class: 'muted' }, '(' + rows.length + ')')), body);
  }

  function renderRound(v) {
    const r = v.correctionRound;
    const parts = [h('h3', null, 'Correction round')];
    if (!r) {
      parts.push(h('p', { id: 'round', class: 'muted', data: { active: 'false' } },
        'None active: every member agrees with the stored metadata version.'));
    } else {
      parts.push(h('p', { id: 'round', data: { active: 'true' } },
        badge('round #' + r.id, 'warn'), ' started at ', clock(new Date(r.startedMs)),
        ' from metadata version ', num(r.startedVersion), '; synced: ',
        r.synced && r.synced.length ? r.synced.join(', ') : 'nobody yet',
        '. No member gets a new shard until every member has synced and the blockers clear.'));
      if (r.blockers && r.blockers.length) {
        parts.push(table(['Shard', 'Held by', 'Until', 'Since version'], r.blockers.map((b) =>
          h('tr', null, h('td', { class: 'num' }, b.shard), h('td', null, b.member),
            h('td', null, b.untilMs ? clock(new Date(b.untilMs))
              : 'it reports REVOKED or leaves'), h('td', { class: 'num' }, num(b.sinceVersion)))),
        { id: 'blockers', class: 'grid' }));
      }
    }
    if (v.takenShards && v.takenShards.length) {
      parts.push(h('h4', null, 'Shards taken from a stuck owner'),
        table(['Shard', 'From', 'Taken at', 'Released at'], v.takenShards.map((t) =>
          h('tr', null, h('td', { class: 'num' }, t.shard), h('td', null, t.member),
            h('td', null, clock(new Date(t.takenMs))), h('td', null, clock(new Date(t.releaseAtMs))))),
        { id: 'taken', class: 'grid' }));
    }
    return h('section', null, parts);
  }

  // Reshard progress (SPEC RS3): the stream's generations from its layout, and per generation
  // what this group has read (completed) and what its waiting children wait for.
  function renderReshard(v, streamView) {
    const mine = Object.create(null);
    for (const g of v.generations || []) mine[g.generation] = g;
    const waiting = (v.shards || []).filter((s) => s.state === 'WAITING_PARENTS').length;
    let parentsIncomplete = 0;
    const layout = streamView && !streamView.error ? streamView : null;
    const gens = layout ? layout.generations || [] : [];
    for (const g of gens) {
      const m = mine[g.generation];
      if (g.state === 'SEALED' && m) parentsIncomplete += m.shards.length - m.completed.length;
    }
    const inProgress = gens.some((g) => g.state !== 'ACTIVE') || waiting > 0;
    const parts = [h('h3', null, 'Reshard progress')];
    if (!layout) {
      parts.push(h('p', { class: 'muted' }, 'The stream layout could not be read: ',
        streamView && streamView.error ? streamView.error.code + ' ' + streamView.error.message : ''));
    } else {
      parts.push(h('p', { id: 'reshard-summary', data: {
        inProgress: String(inProgress), parentsIncomplete, childrenWaiting: waiting } },
        inProgress ? [badge('resharding', 'warn'), ' parents not read to their seal by this group: ',
          h('b', null, parentsIncomplete), ' · children waiting for them: ', h('b', null, waiting)]
          : 'No reshard in progress: one ACTIVE generation of ' + (gens[0] ? gens[0].shardCount : '?') +
            ' shards.'));
      const rows = gens.map((g) => {
        const m = mine[g.generation];
        const ids = (g.shards || []).map((s) => s.id);
        let progress = dash;
        if (m) {
          progress = m.completed.length === m.shards.length && m.shards.length
            ? 'read to the seal'
            : m.waitingFor.length ? 'waiting for ' + ranges(m.waitingFor)
              : g.state === 'SEALED' ? 'reading to the seal' : 'reading';
        } else if (g.state === 'RETIRED') {
          progress = 'retired (read by every group)';
        } else if (g.state === 'PREPARING') {
          // RS2's routing-lease wait (docs/protocol.md 7.5 step 1), by the coordinator's clock.
          progress = g.preparedAtMs && g.routingWaitMs
            ? 'waiting out producers\' routing lease: the generation before it is sealed from ' +
              clock(new Date(g.preparedAtMs + g.routingWaitMs))
            : 'being prepared (the coordinator seals the generation before it)';
        }
        return h('tr', { data: { generation: g.generation, state: g.state } },
          h('td', { class: 'num' }, g.generation), h('td', null, badge(g.state, 'gen-' + g.state.toLowerCase())),
          h('td', { class: 'num' }, num(g.shardCount)), h('td', null, ranges(ids)),
          h('td', { class: 'num' }, m ? m.completed.length + ' / ' + m.shards.length : dash),
          h('td', null, progress));
      });
      parts.push(table(['Generation', 'State', 'Shards', 'Ids', 'Completed by this group',
                        'This group'], rows, { id: 'generations', class: 'grid' }));
      if (layout.groups && layout.groups.length > 1) {
        parts.push(h('p', { class: 'muted' }, 'Other groups of this stream: ',
          layout.groups.filter((g) => g !== v.group).map((g, i) =>
            [i ? ', ' : '', h('a', { href: groupHref(v.stream, g) }, g)])));
      }
    }
    return h('section', null, parts);
  }

  function renderShards(v) {
    const shards = v.shards || [];
    const shown = state.shardFilter ? shards.filter((s) => s.state === state.shardFilter) : shards;
    const filter = h('select', { id: 'shard-filter', 'aria-label': 'show shards in state' },
      h('option', { value: '' }, 'all states'),
      STATES.map((s) => h('option', { value: s, selected: s === state.shardFilter }, s)));
    filter.addEventListener('change', () => { state.shardFilter = filter.value; redraw(); });
    const rows = shown.map((s) => h('tr', { data: { shard: s.id, state: s.state, owner: s.owner || '' } },
      h('td', { class: 'num id' }, s.id),
      h('td', { class: 'num gen' }, s.generation),
      h('td', { class: 'key' }, h('code', null, s.stream)),
      h('td', { class: 'state' }, stateBadge(s.state)),
      h('td', { class: 'owner' }, s.owner || dash),
      h('td', { class: 'target' + (s.target !== s.owner ? ' moving' : '') }, s.target || dash),
      h('td', { class: 'waiting' }, s.waitingFor ? ranges(s.waitingFor) : ''),
      h('td', { class: 'num lag', title: typeof s.lag === 'number' ? null : 'Redis cannot tell' },
        num(s.lag)),
      h('td', { class: 'num pending' }, num(s.pending)),
      h('td', { class: 'num oldest' }, s.pending ? duration(s.oldestPendingMs) : dash)));
    return h('section', null,
      h('h3', null, 'Shards ', h('span', { class: 'muted' }, '(' + shown.length +
        (shown.length !== shards.length ? ' of ' + shards.length : '') + ') '), filter),
      table(['Shard', 'Gen', 'Stream key', 'State', 'Owner', 'Target', 'Waiting for', 'Lag',
             'Pending', 'Oldest pending'], rows, { id: 'shards', class: 'grid' }));
  }

  function renderGroup(data) {
    const v = data.view;
    const t = totals(v);
    return [
      h('h2', null, v.stream, h('span', { class: 'muted' }, ' / '), v.group),
      renderSummary(v, t),
      renderMembers(v, data.fetchedAt),
      renderReshard(v, data.stream),
      renderRound(v),
      renderShards(v),
    ];
  }

  // ── page state ─────────────────────────────────────────────────────────────────────────
  const sameRoute = (a, b) =>
    a.view === b.view && a.stream === b.stream && a.group === b.group;

  function renderCrumbs() {
    const r = state.route;
    const crumbs = [h('a', { href: '#' }, 'groups')];
    if (r.view === 'group') crumbs.push(' / ', h('span', null, r.stream + ' / ' + r.group));
    $('crumbs').replaceChildren(...crumbs);
  }

  function explain(e) {
    if (e.status === 401) {
      return 'The coordinator refused the request: 401 UNAUTHORIZED (' + e.message + '). ' +
        (state.token ? 'The token entered is not accepted. ' : 'It needs a token. ') +
        'Enter the admin token (or a monitor token, where roles are configured) above.';
    }
    if (e.status === 403) {
      return 'The token is valid but may not read groups: 403 FORBIDDEN (' + e.message + '). ' +
        'Use a monitor or admin token.';
    }
    return e.code + (e.status ? ' (HTTP ' + e.status + ')' : '') + ': ' + e.message;
  }

  function redraw() {
    renderCrumbs();
    const last = state.last && sameRoute(state.last.route, state.route) ? state.last : null;
    const banner = $('banner');
    if (state.error) {
      const e = state.error;
      banner.hidden = false;
      banner.className = e.status === 401 || e.status === 403 ? 'auth' : 'error';
      banner.dataset.code = e.code;
      banner.dataset.status = String(e.status);
      banner.replaceChildren(h('strong', null, explain(e)),
        last ? h('div', null, 'Showing the data of ' + clock(last.at) + ' (stale).') : '');
    } else {
      banner.hidden = true;
      banner.replaceChildren();
      delete banner.dataset.code;
      delete banner.dataset.status;
    }
    document.body.dataset.view = state.route.view;
    document.body.dataset.state = state.error ? 'error' : last ? 'ready' : 'loading';
    document.body.classList.toggle('stale', Boolean(state.error && last));
    const main = $('main');
    if (!last) {
      main.replaceChildren(h('p', { class: 'muted' }, state.error ? 'No data.' : 'Loading…'));
    } else {
      main.replaceChildren(...(last.route.view === 'group' ? renderGroup(last.data)
                                                            : renderGroups(last.data)));
    }
    updateClock();
  }

  function updateClock() {
    const u = $('updated');
    if (!state.last) {
      u.textContent = 'not loaded yet';
      return;
    }
    const ago = Math.max(0, Math.round((Date.now() - state.last.at.getTime()) / 1000));
    u.textContent = 'updated ' + clock(state.last.at) + ' (' + ago + ' s ago)' +
      (state.paused ? ' · paused' : '');
  }

  async function refresh() {
    clearTimeout(state.timer);
    const seq = ++state.seq;
    const route = state.route;
    try {
      const data = route.view === 'group' ? await loadGroup(route.stream, route.group)
                                          : await loadGroups();
      if (seq !== state.seq) return;
      state.last = { route, data, at: new Date() };
      state.error = null;
      document.body.dataset.loads = String(++state.loads);
    } catch (e) {
      if (seq !== state.seq) return;
      state.error = e instanceof ApiError ? e : new ApiError(0, 'CONSOLE_ERROR', String(e));
      if (e.status === 401 || e.status === 403) state.last = null;  // refused: show nothing
    }
    try {
      redraw();
    } catch (e) {
      // A view this page cannot draw (a field it does not expect): say so, keep polling.
      state.error = new ApiError(0, 'CONSOLE_ERROR', 'cannot show this answer: ' + e);
      state.last = null;
      redraw();
    }
    schedule();
  }

  function schedule() {
    clearTimeout(state.timer);
    if (!state.paused) state.timer = setTimeout(refresh, state.intervalSec * 1000);
  }

  function setToken(token) {
    state.token = token || '';
    if (state.token) sessionStorage.setItem(TOKEN_KEY, state.token);
    else sessionStorage.removeItem(TOKEN_KEY);
    $('token').value = '';
    $('token-state').textContent = state.token ? 'token set for this tab' : 'no token';
  }

  function start() {
    setToken(sessionStorage.getItem(TOKEN_KEY) || '');
    readAddress();
    $('token-form').addEventListener('submit', (ev) => {
      ev.preventDefault();
      setToken($('token').value.trim());
      refresh();
    });
    $('token-forget').addEventListener('click', () => { setToken(''); refresh(); });
    $('interval').addEventListener('change', () => {
      state.intervalSec = Number($('interval').value) || 5;
      schedule();
    });
    $('pause').addEventListener('click', () => {
      state.paused = !state.paused;
      $('pause').textContent = state.paused ? 'Resume' : 'Pause';
      $('pause').setAttribute('aria-pressed', String(state.paused));
      if (state.paused) clearTimeout(state.timer); else refresh();
      updateClock();
    });
    $('refresh-now').addEventListener('click', refresh);
    window.addEventListener('hashchange', () => {
      readAddress();
      state.shardFilter = '';
      redraw();
      refresh();
    });
    setInterval(updateClock, 1000);
    redraw();
    refresh();
  }

  start();
}());
