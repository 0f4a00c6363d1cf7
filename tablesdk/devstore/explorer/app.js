// devstore explorer: talks to the emulator's own Table REST API (JSON, full metadata), as a client does.
// Every value from the service is put on the page as text (textContent, input values, attributes
// set as properties): never parsed as HTML. No other origin is contacted (the page's
// Content-Security-Policy allows only 'self').
"use strict";

(function () {
  const meta = (name) => document.querySelector(`meta[name="${name}"]`).content;
  const TOKEN = meta("tablesdk-explorer-token");
  const READ_ONLY = meta("tablesdk-explorer-mode") === "read-only";
  const ACCOUNT = meta("tablesdk-explorer-account");
  const BASE = "/" + encodeURIComponent(ACCOUNT) + "/";
  const VERSION = "2019-02-02";
  const TYPES = ["Edm.String", "Edm.Int32", "Edm.Int64", "Edm.Double", "Edm.Boolean", "Edm.DateTime",
    "Edm.Guid", "Edm.Binary"];
  const SYSTEM = new Set(["PartitionKey", "RowKey", "Timestamp"]);

  const $ = (id) => document.getElementById(id);

  /** An element with text children only (strings become text nodes, never markup). */
  function el(tag, props, ...children) {
    const node = document.createElement(tag);
    Object.assign(node, props || {});
    for (const child of children) {
      node.append(child instanceof Node ? child : document.createTextNode(String(child)));
    }
    return node;
  }

  function clear(node) {
    while (node.firstChild) node.removeChild(node.firstChild);
  }

  // Each user action runs as one task; the page counts those finished in body[data-done]
  // (what a test waits on) and says in body[data-busy] whether one is running.
  let running = 0;
  let finished = 0;

  function action(handler) {
    return async function (event) {
      running += 1;
      document.body.dataset.busy = "true";
      try {
        await handler(event);
      } finally {
        running -= 1;
        finished += 1;
        document.body.dataset.done = String(finished);
        if (running === 0) document.body.dataset.busy = "false";
      }
    };
  }

  function on(id, type, handler) {
    $(id).addEventListener(type, action(handler));
  }

  function showError(id, message) {
    $(id).textContent = message || "";
  }

  // ------------------------------------------------------------------ REST

  class ServiceError extends Error {
    constructor(status, code, message) {
      super(message);
      this.status = status;
      this.code = code;
    }
    toString() {
      return `${this.status} ${this.code}: ${this.message}`;
    }
  }

  /** A number whose JSON text says it is a Double (it has a fraction or an exponent). */
  class DoubleNumber {
    constructor(value) { this.value = value; }
  }

  /** JSON.parse that keeps Double apart from Int32 (5.0 is a Double, 5 an Int32). */
  function parseJson(text) {
    return JSON.parse(text, function (key, value, context) {
      if (typeof value !== "number") return value;
      if (context && typeof context.source === "string") {
        return /[.eE]/.test(context.source) ? new DoubleNumber(value) : value;
      }
      return Number.isInteger(value) ? value : new DoubleNumber(value);
    });
  }

  async function rest(method, path, options) {
    const opts = options || {};
    const headers = {
      "Accept": "application/json;odata=fullmetadata",
      "x-ms-version": VERSION,
      "DataServiceVersion": "3.0;NetFx",
      "MaxDataServiceVersion": "3.0;NetFx",
      "x-tablesdk-explorer-token": TOKEN,
    };
    Object.assign(headers, opts.headers || {});
    let body;
    if (opts.body !== undefined) {
      headers["Content-Type"] = "application/json";
      body = JSON.stringify(opts.body);
    }
    let url = path.startsWith("/") ? path : BASE + path;
    const query = new URLSearchParams();
    for (const [name, value] of Object.entries(opts.query || {})) {
      if (value !== undefined && value !== null && value !== "") query.set(name, value);
    }
    const queryText = query.toString();
    if (queryText) url += "?" + queryText.replace(/\+/g, "%20");
    const response = await fetch(url, {
      method, headers, body, credentials: "same-origin", cache: "no-store", redirect: "error",
      referrerPolicy: "no-referrer",
    });
    const text = await response.text();
    if (!response.ok) {
      let code = response.statusText || "Error";
      let message = text;
      try {
        const error = JSON.parse(text)["odata.error"];
        code = error.code;
        message = error.message.value;
      } catch (ignored) {
        // not a service error body: show the text as it came
      }
      throw new ServiceError(response.status, code, message);
    }
    return { response, data: text ? parseJson(text) : null };
  }

  function keyPath(table, pk, rk) {
    const quote = (value) => encodeURIComponent(value.replace(/'/g, "''"));
    return `${encodeURIComponent(table)}(PartitionKey='${quote(pk)}',RowKey='${quote(rk)}')`;
  }

  // ------------------------------------------------------------------ EDM values

  /** [EDM type, text shown] of one property of an entity read with full metadata. */
  function typedValue(entity, name) {
    const value = entity[name];
    const annotated = entity[name + "@odata.type"];
    if (value instanceof DoubleNumber) return ["Edm.Double", String(value.value)];
    if (annotated) return [annotated, String(value)];
    if (typeof value === "boolean") return ["Edm.Boolean", String(value)];
    if (typeof value === "number") return ["Edm.Int32", String(value)];
    if (value === null) return ["null", ""];
    return ["Edm.String", String(value)];
  }

  function propertiesOf(entity) {
    return Object.keys(entity).filter((name) => !name.startsWith("odata.") && !name.includes("@"));
  }

  /** The JSON value (and its @odata.type, or null) for a value typed in the editor; throws on bad input. */
  function wireValue(type, text) {
    switch (type) {
      case "Edm.String":
        return [text, null];
      case "Edm.Int32": {
        if (!/^[+-]?\d+$/.test(text.trim())) throw new Error("an Int32 is a whole number");
        const n = Number(text);
        if (n < -2147483648 || n > 2147483647) throw new Error("an Int32 is between -2147483648 and 2147483647");
        return [n, null];
      }
      case "Edm.Int64": {
        if (!/^[+-]?\d+$/.test(text.trim())) throw new Error("an Int64 is a whole number");
        const n = BigInt(text.trim());
        if (n < -(2n ** 63n) || n > 2n ** 63n - 1n) throw new Error("an Int64 is between -2^63 and 2^63-1");
        return [n.toString(), "Edm.Int64"];
      }
      case "Edm.Double": {
        const t = text.trim();
        if (t === "NaN" || t === "Infinity" || t === "-Infinity") return [t, "Edm.Double"];
        const n = Number(t);
        if (t === "" || !Number.isFinite(n)) throw new Error("a Double is a number, NaN, Infinity or -Infinity");
        return [n, "Edm.Double"];
      }
      case "Edm.Boolean": {
        const t = text.trim().toLowerCase();
        if (t !== "true" && t !== "false") throw new Error("a Boolean is true or false");
        return [t === "true", null];
      }
      case "Edm.DateTime": {
        const t = text.trim();
        if (!/^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}(:\d{2}(\.\d{1,7})?)?(Z|[+-]\d{2}:\d{2})$/.test(t)) {
          throw new Error("a DateTime is ISO 8601 with a zone, e.g. 2024-05-01T12:30:00Z");
        }
        return [t, "Edm.DateTime"];
      }
      case "Edm.Guid": {
        const t = text.trim();
        if (!/^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$/.test(t)) {
          throw new Error("a Guid is written 8-4-4-4-12 hexadecimal digits");
        }
        return [t, "Edm.Guid"];
      }
      case "Edm.Binary": {
        const t = text.trim();
        if (!/^[A-Za-z0-9+/]*={0,2}$/.test(t) || t.length % 4 !== 0) throw new Error("a Binary is written in base64");
        return [t, "Edm.Binary"];
      }
      default:
        throw new Error("unknown type " + type);
    }
  }

  // ------------------------------------------------------------------ state

  const state = {
    table: null,
    filter: "",
    top: 20,
    pageTokens: [],     // continuation of each page shown before the current one
    current: null,      // continuation the current page was read with (null: the first page)
    next: null,         // continuation of the next page, or null at the end
    entities: [],
    editing: null,      // the entity being edited, or null when inserting
  };

  // ------------------------------------------------------------------ tables

  async function loadTables() {
    showError("tables-error", "");
    const names = [];
    let next = null;
    try {
      do {
        const { response, data } = await rest("GET", "Tables", { query: { NextTableName: next } });
        for (const row of data.value) names.push(row.TableName);
        next = response.headers.get("x-ms-continuation-NextTableName");
      } while (next);
    } catch (error) {
      showError("tables-error", String(error));
      return;
    }
    const list = $("table-list");
    clear(list);
    for (const name of names) {
      const button = el("button", { type: "button", className: name === state.table ? "selected" : "", title: name },
        name);
      button.dataset.table = name;
      button.addEventListener("click", action(() => openTable(name)));
      list.append(el("li", {}, button));
    }
    $("no-tables").hidden = names.length > 0;
    if (state.table !== null && !names.includes(state.table)) closeTable();
  }

  async function createTable(event) {
    event.preventDefault();
    const name = $("new-table-name").value.trim();
    showError("tables-error", "");
    try {
      await rest("POST", "Tables", { body: { TableName: name }, headers: { "Prefer": "return-no-content" } });
    } catch (error) {
      showError("tables-error", String(error));
      return;
    }
    $("new-table-name").value = "";
    state.table = name;
    await loadTables();
    await openTable(name);
  }

  function askDeleteTable() {
    $("delete-table-question").textContent = `Delete table ${state.table} and every entity in it?`;
    $("delete-table-confirm").hidden = false;
  }

  async function deleteTable() {
    const name = state.table;
    $("delete-table-confirm").hidden = true;
    try {
      await rest("DELETE", `Tables('${encodeURIComponent(name.replace(/'/g, "''"))}')`);
    } catch (error) {
      showError("table-error", String(error));
      return;
    }
    closeTable();
    await loadTables();
  }

  function closeTable() {
    state.table = null;
    $("table-pane").hidden = true;
    closeEditor();
  }

  // ------------------------------------------------------------------ entities

  async function openTable(name) {
    state.table = name;
    state.filter = "";
    state.pageTokens = [];
    state.current = null;
    $("filter").value = "";
    $("table-title").textContent = name;
    $("table-pane").hidden = false;
    $("delete-table-confirm").hidden = true;
    showError("table-error", "");
    showError("filter-error", "");
    closeEditor();
    for (const button of $("table-list").querySelectorAll("button")) {
      button.classList.toggle("selected", button.dataset.table === name);
    }
    await loadPage();
  }

  async function loadPage() {
    showError("filter-error", "");
    showError("table-error", "");
    const query = { "$top": String(state.top), "$filter": state.filter };
    if (state.current) {
      query.NextPartitionKey = state.current.pk;
      query.NextRowKey = state.current.rk;
    }
    let result;
    try {
      result = await rest("GET", encodeURIComponent(state.table) + "()", { query });
    } catch (error) {
      showError(state.filter ? "filter-error" : "table-error", String(error));
      renderEntities([]);
      state.next = null;
      updatePager();
      return;
    }
    const pk = result.response.headers.get("x-ms-continuation-NextPartitionKey");
    const rk = result.response.headers.get("x-ms-continuation-NextRowKey");
    state.next = pk ? { pk, rk: rk || "" } : null;
    renderEntities(result.data.value);
    updatePager();
  }

  function updatePager() {
    $("prev-page").disabled = state.pageTokens.length === 0;
    $("next-page").disabled = state.next === null;
    const first = state.pageTokens.length * state.top + 1;
    const count = state.entities.length;
    $("page-info").textContent = count
      ? `page ${state.pageTokens.length + 1}: entities ${first}-${first + count - 1}${state.next ? "" : " (last page)"}`
      : `page ${state.pageTokens.length + 1}`;
  }

  async function nextPage() {
    if (state.next === null) return;
    state.pageTokens.push(state.current);
    state.current = state.next;
    await loadPage();
  }

  async function prevPage() {
    if (state.pageTokens.length === 0) return;
    state.current = state.pageTokens.pop();
    await loadPage();
  }

  async function applyFilter(event) {
    event.preventDefault();
    state.filter = $("filter").value.trim();
    state.top = Number($("page-size").value);
    state.pageTokens = [];
    state.current = null;
    await loadPage();
  }

  function renderEntities(entities) {
    state.entities = entities;
    const columns = ["PartitionKey", "RowKey", "Timestamp"];
    for (const entity of entities) {
      for (const name of propertiesOf(entity)) {
        if (!columns.includes(name)) columns.push(name);
      }
    }
    const table = $("entities");
    const head = table.tHead;
    clear(head);
    const headRow = el("tr", {});
    for (const name of columns) headRow.append(el("th", { scope: "col" }, name));
    if (!READ_ONLY) headRow.append(el("th", {}, ""));
    head.append(headRow);
    const body = table.tBodies[0];
    clear(body);
    entities.forEach((entity, index) => {
      const row = el("tr", {});
      row.dataset.index = String(index);
      for (const name of columns) {
        if (!(name in entity)) {
          row.append(el("td", { className: "absent" }));
          continue;
        }
        const [type, text] = typedValue(entity, name);
        const cell = el("td", {}, el("div", { className: "value", title: text }, text));
        if (!SYSTEM.has(name) || name === "Timestamp") cell.append(el("div", { className: "type" }, type));
        cell.dataset.property = name;
        cell.dataset.type = type;
        row.append(cell);
      }
      if (!READ_ONLY) {
        const edit = el("button", { type: "button", className: "edit-entity" }, "Edit");
        edit.addEventListener("click", action(() => openEditor(entity)));
        const remove = el("button", { type: "button", className: "delete-entity danger" }, "Delete");
        remove.addEventListener("click", action(() => deleteEntity(entity, remove)));
        row.append(el("td", { className: "actions" }, edit, " ", remove));
      }
      body.append(row);
    });
    $("no-entities").hidden = entities.length > 0;
  }

  async function deleteEntity(entity, button) {
    if (!button.classList.contains("armed")) {
      button.classList.add("armed");
      button.textContent = "Confirm delete";
      return;
    }
    try {
      await rest("DELETE", keyPath(state.table, entity.PartitionKey, entity.RowKey),
        { headers: { "If-Match": entity["odata.etag"] } });
    } catch (error) {
      showError("table-error", String(error));
      return;
    }
    await loadPage();
  }

  // ------------------------------------------------------------------ editor

  function propertyRow(name, type, text) {
    const nameInput = el("input", { className: "prop-name", value: name, spellcheck: false });
    nameInput.setAttribute("aria-label", "Property name");
    const typeSelect = el("select", { className: "prop-type" });
    typeSelect.setAttribute("aria-label", "EDM type");
    for (const t of TYPES) typeSelect.append(el("option", { value: t, selected: t === type }, t.slice(4)));
    const valueInput = el("input", { className: "prop-value", value: text, spellcheck: false });
    valueInput.setAttribute("aria-label", "Value");
    const remove = el("button", { type: "button", className: "remove-property", title: "Remove this property" }, "×");
    const row = el("tr", {},
      el("td", {}, nameInput), el("td", {}, typeSelect),
      el("td", {}, valueInput, el("div", { className: "field-error" })), el("td", {}, remove));
    remove.addEventListener("click", action(() => row.remove()));
    return row;
  }

  function openEditor(entity) {
    state.editing = entity;
    showError("editor-error", "");
    $("editor-title").textContent = entity ? "Edit entity" : "Insert entity";
    $("edit-pk").value = entity ? entity.PartitionKey : "";
    $("edit-rk").value = entity ? entity.RowKey : "";
    $("edit-pk").readOnly = $("edit-rk").readOnly = Boolean(entity);
    const rows = $("edit-props");
    clear(rows);
    if (entity) {
      for (const name of propertiesOf(entity)) {
        if (SYSTEM.has(name)) continue;
        const [type, text] = typedValue(entity, name);
        rows.append(propertyRow(name, type, text));
      }
    } else {
      rows.append(propertyRow("", "Edm.String", ""));
    }
    $("editor").hidden = false;
    (entity ? rows.querySelector(".prop-value") || $("save-entity") : $("edit-pk")).focus();
  }

  function closeEditor() {
    state.editing = null;
    $("editor").hidden = true;
  }

  async function saveEntity(event) {
    event.preventDefault();
    showError("editor-error", "");
    const body = { PartitionKey: $("edit-pk").value, RowKey: $("edit-rk").value };
    let bad = false;
    for (const row of $("edit-props").querySelectorAll("tr")) {
      const name = row.querySelector(".prop-name").value.trim();
      const type = row.querySelector(".prop-type").value;
      const input = row.querySelector(".prop-value");
      const problem = row.querySelector(".field-error");
      problem.textContent = "";
      input.removeAttribute("aria-invalid");
      if (!name) {
        if (input.value === "") continue;  // an empty row is ignored
        problem.textContent = "a property needs a name";
        bad = true;
        continue;
      }
      try {
        const [value, annotation] = wireValue(type, input.value);
        if (annotation) body[name + "@odata.type"] = annotation;
        body[name] = value;
      } catch (error) {
        problem.textContent = error.message;
        input.setAttribute("aria-invalid", "true");
        bad = true;
      }
    }
    if (bad) {
      showError("editor-error", "Some values are not valid for their type (see above).");
      return;
    }
    const entity = state.editing;
    try {
      if (entity) {
        await rest("PUT", keyPath(state.table, entity.PartitionKey, entity.RowKey),
          { body, headers: { "If-Match": entity["odata.etag"] } });
      } else {
        await rest("POST", encodeURIComponent(state.table), { body, headers: { "Prefer": "return-no-content" } });
      }
    } catch (error) {
      showError("editor-error", String(error));
      return;
    }
    closeEditor();
    await loadPage();
  }

  // ------------------------------------------------------------------ connection string

  async function showConnection() {
    $("connection-status").textContent = "";
    let data;
    try {
      data = (await rest("GET", "/_explorer/connection-string")).data;
    } catch (error) {
      $("connection-status").textContent = String(error);
      $("connection").hidden = false;
      return;
    }
    $("connection-string").value = data.connectionString;
    $("connection").hidden = false;
  }

  async function copyConnection() {
    const input = $("connection-string");
    input.select();
    try {
      await navigator.clipboard.writeText(input.value);
      $("connection-status").textContent = "Copied.";
    } catch (error) {
      $("connection-status").textContent = "Selected: press Ctrl+C to copy.";
    }
  }

  function hideConnection() {
    $("connection-string").value = "";
    $("connection").hidden = true;
  }

  // ------------------------------------------------------------------ start

  function start() {
    $("account").textContent = ACCOUNT;
    if (READ_ONLY) {
      document.body.classList.add("read-only");
      $("mode-badge").hidden = false;
    } else {
      on("create-table-form", "submit", createTable);
      on("delete-table", "click", askDeleteTable);
      on("delete-table-yes", "click", deleteTable);
      on("delete-table-no", "click", () => { $("delete-table-confirm").hidden = true; });
      on("insert-entity", "click", () => openEditor(null));
      on("add-property", "click", () => $("edit-props").append(propertyRow("", "Edm.String", "")));
      on("editor-form", "submit", saveEntity);
      on("cancel-edit", "click", closeEditor);
    }
    on("refresh-tables", "click", loadTables);
    on("filter-form", "submit", applyFilter);
    on("page-size", "change", applyFilter);
    on("next-page", "click", nextPage);
    on("prev-page", "click", prevPage);
    on("show-connection", "click", showConnection);
    on("copy-connection", "click", copyConnection);
    on("hide-connection", "click", hideConnection);
    action(loadTables)().then(() => { document.body.dataset.ready = "true"; });
  }

  start();
})();
