/* The site's search: kb_tools/search.py's ranking, ported line for line, over the index that
 * `kb build` exports (search/kb-index.json). Every ranking constant, the stop words and the
 * stemming rules come from that file; none is written here.
 *
 * In a page it adds a search box to the header (keys "/" and "s" focus it). Under node it is
 * the parity check's ranker: `node kb-search.js DIR` reads the index and the token table from
 * DIR and a JSON list of queries on stdin, and prints each query's hits as JSON lines.
 */
(function (root, factory) {
  "use strict";
  const api = factory();
  if (typeof module === "object" && module.exports) module.exports = api;
  else root.KBSearch = api;
  if (typeof document !== "undefined") api.mountBox(document);
  else if (typeof require !== "undefined" && typeof module !== "undefined" && require.main === module) api.cli();
})(typeof self !== "undefined" ? self : this, function () {
  "use strict";

  // ------------------------------------------------------------ Python's string semantics

  // str.split(): the characters Python calls whitespace (U+FEFF, which JS's \s holds, is not one)
  const PY_SPACE = /[\t\n\v\f\r\x1c-\x1f \x85\xa0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000]+/;
  const pySplit = (s) => s.split(PY_SPACE).filter((x) => x !== "");
  const cpLen = (s) => { let n = 0; for (const _ of s) n++; return n; }; // len(): code points
  const isAlpha = (s) => /^\p{L}+$/u.test(s);
  const strip = (s, chars) => {
    let a = 0, b = s.length;
    while (a < b && chars.includes(s[a])) a++;
    while (b > a && chars.includes(s[b - 1])) b--;
    return s.slice(a, b);
  };
  const rstrip = (s, chars) => {
    let b = s.length;
    while (b > 0 && chars.includes(s[b - 1])) b--;
    return s.slice(0, b);
  };

  // ------------------------------------------------------------ the index

  class Index {
    constructor(data) {
      this.data = data;
      const C = data.constants;
      for (const name of ["BM25_K1", "BM25_B", "LINE_BONUS", "CANDIDATES", "VAGUE_IDF", "TRIAGE_PRIOR",
        "LOW_CONFIDENCE", "LEXICAL_SHARE", "DENSE_BASELINE_RANK", "DENSE_CONFIDENCE", "DENSE_FLOOR", "MAX_QUERY_CHARS",
        "MAX_CORRECTED_WORD", "CLOSE_SHARE", "DIFFERENTIAL_SIZE", "SCOPE_CONFIDENCE"]) {
        if (typeof C[name] !== "number") throw new Error(`the search index lacks the constant ${name}: rebuild the site`);
      }
      this.C = C;
      // sum() of floats: plain left to right before Python 3.12, compensated (Neumaier) from 3.12
      this.sum = data.compensated_sum ? neumaierSum : plainSum;
      this.stopStems = new Set(data.stop_stems);
      this.stemRules = data.stem_rules;
      const keep = new Set(data.word_chars + "+-/");
      this.toSpace = (ch) => ch.codePointAt(0) < 0x250 && !keep.has(ch);
      this.special = new Set(data.special);
      this.letters = Array.from(data.letters);
      this.idf = new Map();
      this.postings = new Map();
      data.terms.forEach((t, i) => { this.idf.set(t, data.idf[i]); this.postings.set(t, data.postings[i]); });
      this.phrases = new Map();
      for (const [words, concept] of data.phrases) this.phrases.set(words.join("\u0000"), concept);
      this.vocab = null;
      this.dense = null;
      if (data.dense) {
        const bin = atobBytes(data.dense.vectors);
        this.dense = Object.assign({}, data.dense, { matrix: new Int8Array(bin.buffer, bin.byteOffset, bin.length) });
      }
      this.embedder = null; // set by useEmbedder once the token table is loaded
    }

    // _raw_tokens
    rawTokens(text) {
      let spaced = "";
      for (const ch of text) spaced += this.toSpace(ch) ? " " : (isCjk(ch.codePointAt(0)) ? ` ${ch} ` : ch);
      const out = [];
      for (const chunk of pySplit(spaced)) {
        const bare = rstrip(chunk, "._'");
        if (this.special.has(bare)) { out.push(bare); continue; }
        for (let piece of pySplit(chunk.replace(/[+\-/]/g, " "))) {
          piece = strip(piece, "._'");
          if (piece) out.push(piece);
        }
      }
      return out;
    }

    // _stem
    stem(word) {
      if (cpLen(word) <= 3 || !isAlpha(word)) return word;
      const n = cpLen(word);
      for (const [suffix, repl, minLen] of this.stemRules) {
        if (word.endsWith(suffix) && n >= minLen && !word.endsWith("ss")) return word.slice(0, word.length - suffix.length) + repl;
      }
      return word;
    }

    // _words
    words(text) {
      text = text.toLowerCase().split("n't").join(" not").split("\u2019").join("'");
      const out = [];
      for (const raw of this.rawTokens(text)) {
        if (raw.includes(".") || raw.includes("_")) {
          out.push(raw);
          for (const segment of raw.split(".")) {
            if (segment.includes("_") && segment !== raw) out.push(segment);
            for (const p of segment.split("'").join("_").split("_")) if (p) out.push(this.stem(p));
          }
        } else out.push(this.stem(raw));
      }
      return out;
    }

    // terms
    terms(text) {
      const words = this.words(text), out = [];
      let i = 0;
      while (i < words.length) {
        let matched = false;
        for (let n = Math.min(this.data.longest, words.length - i); n > 0; n--) {
          const concept = this.phrases.get(words.slice(i, i + n).join("\u0000"));
          if (concept) { out.push(concept); i += n; matched = true; break; }
        }
        if (!matched) {
          if (!this.stopStems.has(words[i])) out.push(words[i]);
          i++;
        }
      }
      return out;
    }

    // spelling_vocab
    spellingVocab() {
      if (!this.vocab) {
        const vocab = new Map();
        for (const t of this.data.terms) if (t[0] !== "~" && t[0] !== "=") vocab.set(t, t);
        for (const [words, concept] of this.data.phrases) {
          if (words.length === 1 && !vocab.has(words[0])) vocab.set(words[0], concept);
        }
        this.vocab = vocab;
      }
      return this.vocab;
    }

    // correct
    correct(word) {
      const vocab = this.spellingVocab(), idf = this.idf;
      const chars = Array.from(word);
      if (!(chars.length >= 4 && chars.length <= this.C.MAX_CORRECTED_WORD) || !isAlpha(word)) return [];
      const candidates = new Set();
      for (let i = 0; i <= chars.length; i++) {
        const a = chars.slice(0, i).join(""), b = chars.slice(i);
        if (b.length) {
          const rest = b.slice(1).join("");
          candidates.add(a + rest);
          for (const c of this.letters) candidates.add(a + c + rest);
        }
        if (b.length > 1) candidates.add(a + b[1] + b[0] + b.slice(2).join(""));
        for (const c of this.letters) candidates.add(a + c + b.join(""));
      }
      let best = null, bestKey = null;
      for (const cand of candidates) {
        const term = vocab.get(cand) || vocab.get(this.stem(cand));
        if (!term) continue;
        const key = -(idf.has(term) ? idf.get(term) : 0.0); // the commoner term wins; then the greater word
        if (best === null || key > bestKey || (key === bestKey && cand > best.word)) { best = { word: cand, term }; bestKey = key; }
      }
      if (best) return (best.term.includes("_") || best.term.includes(".")) ? this.words(best.term) : [best.term];
      for (let cut = 3; cut < chars.length - 2; cut++) {
        const head = chars.slice(0, cut).join(""), tail = chars.slice(cut).join("");
        if (vocab.has(head) && vocab.has(tail)) return [vocab.get(head), vocab.get(tail)];
      }
      if (chars.length < 7) return [];
      let found = null, lowest = 3; // rapidfuzz extractOne, Levenshtein distance, cutoff 2: the first lowest
      for (const w of vocab.keys()) {
        if (!isAlpha(w)) continue;
        const wc = Array.from(w);
        if (Math.abs(wc.length - chars.length) > 2) continue;
        const d = levenshtein(chars, wc, 2);
        if (d < lowest) { lowest = d; found = w; if (d === 0) break; }
      }
      return found === null ? [] : [vocab.get(found)];
    }

    // query_terms
    queryTerms(query) {
      const counts = new Map();
      for (const term of this.terms(query)) {
        let found = [term];
        if (!this.idf.has(term)) {
          const fixed = this.correct(term);
          if (fixed.length) found = fixed;
        }
        for (const t of found) counts.set(t, (counts.get(t) || 0) + 1);
      }
      for (const word of pySplit(query.toLowerCase())) if (this.idf.has("=" + word)) counts.set("=" + word, 1);
      return counts;
    }

    // lexical_scores: Map entry -> [score, best line, confidence]
    lexicalScores(q) {
      const C = this.C, idf = this.idf, lengths = this.data.lengths, avg = this.data.avg_length;
      const unseen = Math.log(1 + (lengths.length + 0.5) / 0.5);
      const queryMass = this.sum(Array.from(q.keys(), (t) => (idf.has(t) ? idf.get(t) : unseen))) || 1.0;
      const scores = new Map(), explained = new Map();
      for (const [term, qtf] of q) {
        if (!idf.has(term)) continue;
        const weight = idf.get(term);
        const qweight = weight * (1 + Math.log(qtf));
        const p = this.postings.get(term);
        for (let k = 0; k < p.length; k += 2) {
          const idx = p[k], tf = p[k + 1];
          const norm = tf * (C.BM25_K1 + 1) / (tf + C.BM25_K1 * (1 - C.BM25_B + C.BM25_B * lengths[idx] / avg));
          scores.set(idx, (scores.has(idx) ? scores.get(idx) : 0.0) + qweight * norm);
          explained.set(idx, (explained.has(idx) ? explained.get(idx) : 0.0) + weight);
        }
      }
      let rarest = null;
      for (const t of q.keys()) { const v = idf.has(t) ? idf.get(t) : unseen; if (rarest === null || v > rarest) rarest = v; }
      const vague = (rarest === null ? unseen : rarest) <= C.VAGUE_IDF;
      const top = Array.from(scores).sort((a, b) => b[1] - a[1]).slice(0, C.CANDIDATES);
      const out = new Map();
      for (const [idx, base] of top) {
        let bestCov = 0.0, bestLine = 0;
        this.data.line_terms[idx].forEach((line, n) => {
          const mass = this.sum(line.map((t) => (idf.has(t) ? idf.get(t) : 0.0)));
          if (mass) {
            const cov = this.sum(line.filter((t) => q.has(t)).map((t) => (idf.has(t) ? idf.get(t) : 0.0))) / mass;
            if (cov > bestCov) { bestCov = cov; bestLine = n; }
          }
        });
        const confidence = 50.0 * (Math.min(explained.get(idx) / queryMass, 1.0) + bestCov);
        let score = base + C.LINE_BONUS * bestCov * bestCov;
        if (vague && this.data.areas[idx] === "triage") score *= C.TRIAGE_PRIOR;
        out.set(idx, [score, bestLine, confidence]);
      }
      return out;
    }

    useEmbedder(embedder) {
      if (embedder && this.dense && embedder.dim === this.dense.dim) this.embedder = embedder;
    }

    // dense_scores: Map entry -> [best cosine, its line (-1: the title)]
    // _has_known_word: a word the embedding model knows whole (not a stop word, not shards of one)
    hasKnownWord(query) {
      const vocab = this.embedder.vocab;
      return this.embedder.basicWords(query).some((w) =>
        Array.from(w).length > 2 && vocab.has(w) && !this.stopStems.has(this.stem(w)));
    }

    denseScores(query) {
      const dense = this.dense, out = new Map();
      if (!this.embedder || !dense || !dense.rows) return out;
      const qv = this.embedder.encodeQuery(query, this.sum);
      if (!qv) return out;
      const dim = dense.dim, nRows = dense.rows, m = dense.matrix, sims = new Array(nRows);
      const prods = new Float64Array(dim); // doubles, as Python's floats
      for (let r = 0; r < nRows; r++) {
        const base = r * dim;
        for (let j = 0; j < dim; j++) prods[j] = m[base + j] * qv[j];
        sims[r] = this.sum(prods) * dense.scales[r];
      }
      const starts = dense.starts;
      for (let n = 0; n < starts.length; n++) {
        const start = starts[n], idx = dense.owners[start];
        const stop = n + 1 < starts.length ? starts[n + 1] : nRows;
        let best = start;
        for (let r = start + 1; r < stop; r++) if (sims[r] > sims[best]) best = r;
        out.set(idx, [sims[best], best - start - 1]);
      }
      return out;
    }

    // _fuse
    fuse(lexical, dense) {
      const C = this.C, fused = new Map();
      let bestLexical = 0.0;
      for (const v of lexical.values()) if (v[0] > bestLexical) bestLexical = v[0];
      const cosines = Array.from(dense.values(), (v) => v[0]).sort((a, b) => b - a);
      const best = cosines[0], baseline = cosines[Math.min(C.DENSE_BASELINE_RANK, cosines.length - 1)];
      if (bestLexical > 0) for (const [idx, v] of lexical) fused.set(idx, C.LEXICAL_SHARE * v[0] / bestLexical);
      const spread = best - baseline;
      for (const [idx, v] of dense) {
        const share = spread > 0 && v[0] > baseline ? (1 - C.LEXICAL_SHARE) * (v[0] - baseline) / spread : 0.0;
        fused.set(idx, (fused.has(idx) ? fused.get(idx) : 0.0) + share);
      }
      return fused;
    }

    // validate_query: null for an empty query; throws for one over the limit
    validate(query) {
      query = pySplit(query).join(" ");
      if (!query) return null;
      const n = cpLen(query);
      if (n > this.C.MAX_QUERY_CHARS) throw new Error(`query is ${n} characters; the limit is ${this.C.MAX_QUERY_CHARS}`);
      return query;
    }

    // rank: [{id, title, area, score, matched, low_confidence}], best first
    rank(query, limit = 10, dense = true) {
      const C = this.C, d = this.data;
      query = this.validate(query);
      if (query === null) return [];
      const q = this.queryTerms(query);
      const lexical = this.lexicalScores(q);
      const near = dense ? this.denseScores(query) : new Map();
      if (!Array.from(q.keys()).some((t) => this.idf.has(t)) && !(near.size && this.hasKnownWord(query))) return [];
      let fused;
      if (near.size) fused = this.fuse(lexical, near);
      else { fused = new Map(); for (const [i, v] of lexical) fused.set(i, v[0]); }
      const ids = d.ids;
      const order = Array.from(fused.keys()).sort((a, b) =>
        (fused.get(b) - fused.get(a)) || (ids[a] < ids[b] ? -1 : ids[a] > ids[b] ? 1 : 0)).slice(0, limit);
      const hits = [];
      let top = null;
      for (const idx of order) {
        const [, lexLine, confLex] = lexical.get(idx) || [0.0, null, 0.0];
        const [cos, denseLine] = near.get(idx) || [0.0, null];
        let line = lexLine;
        const confDense = C.DENSE_CONFIDENCE * (cos - C.DENSE_FLOOR);
        const confidence = Math.max(confLex, confDense);
        if (line === null || (confLex < confDense && denseLine !== null && denseLine >= 0)) line = denseLine;
        if (top === null) top = [confidence, fused.get(idx)];
        const score = top[1] > 0 ? top[0] * fused.get(idx) / top[1] : 0.0;
        const symptoms = d.symptoms[idx];
        const matched = symptoms.length && line !== null && line >= 0 && line < symptoms.length ? symptoms[line]
          : (symptoms.length ? symptoms[0] : "");
        hits.push({ id: ids[idx], title: d.titles[idx], area: d.areas[idx], score, matched,
          low_confidence: score < C.LOW_CONFIDENCE });
      }
      return hits;
    }

    // kb_tools/search/answer.py's scope_words: lower-case, every character but a letter, digit or _ a space
    scopeWords(text) {
      let out = "";
      for (const ch of text.toLowerCase()) out += /[\p{L}\p{N}_]/u.test(ch) ? ch : " ";
      return " " + pySplit(out).join(" ") + " ";
    }

    // out_of_scope: the scope note, or null
    outOfScope(query, hits) {
      if (hits.length && hits[0].score >= this.C.SCOPE_CONFIDENCE) return null;
      const words = this.scopeWords(query);
      for (const [name, phrases] of this.data.scope.topics) {
        if (phrases.some((p) => words.includes(` ${p} `))) {
          return `this reads as ${name}, which the KB does not cover; ${this.data.scope.covers}`;
        }
      }
      return null;
    }

    // answer: rank's hits with what `kb search --json` says beside them (tell_apart, out_of_scope)
    answer(query, limit = 10, dense = true) {
      const hits = this.rank(query, limit, dense);
      const words = this.validate(query);
      const scope = words === null ? null : this.outOfScope(words, hits);
      if (scope) {
        for (const h of hits) { h.low_confidence = true; h.out_of_scope = scope; }
        return hits;
      }
      if (hits.length >= 2 && hits[0].score > 0) {
        const group = hits.slice(0, this.C.DIFFERENTIAL_SIZE).filter((h) => h.score >= this.C.CLOSE_SHARE * hits[0].score);
        if (group.length >= 2) for (const h of group) h.tell_apart = this.data.checks[this.data.ids.indexOf(h.id)];
      }
      return hits;
    }
  }

  function plainSum(xs) { let s = 0; for (const x of xs) s += x; return s; }

  function neumaierSum(xs) {
    let s = 0.0, c = 0.0;
    for (const x of xs) {
      const t = s + x;
      if (Math.abs(s) >= Math.abs(x)) c += (s - t) + x; else c += (x - t) + s;
      s = t;
    }
    if (c && Number.isFinite(c)) s += c;
    return s;
  }

  function levenshtein(a, b, cutoff) {
    let prev = Array.from({ length: b.length + 1 }, (_, j) => j);
    for (let i = 1; i <= a.length; i++) {
      const cur = [i];
      let low = i;
      for (let j = 1; j <= b.length; j++) {
        cur[j] = Math.min(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (a[i - 1] === b[j - 1] ? 0 : 1));
        if (cur[j] < low) low = cur[j];
      }
      if (low > cutoff) return cutoff + 1;
      prev = cur;
    }
    return prev[b.length];
  }

  function atobBytes(b64) {
    if (typeof Buffer !== "undefined") return new Uint8Array(Buffer.from(b64, "base64"));
    const s = atob(b64), out = new Uint8Array(s.length);
    for (let i = 0; i < s.length; i++) out[i] = s.charCodeAt(i);
    return out;
  }

  // ------------------------------------------------------------ kb_tools/embed.py

  class Embedder {
    // tokens: the token file's text; rows: its int8 table (ArrayBuffer); scales: float32 (ArrayBuffer)
    constructor(spec, tokensText, rows, scales) {
      const tokens = tokensText.split("\n");
      if (tokens.length && tokens[tokens.length - 1] === "") tokens.pop();
      this.scales = new Float32Array(scales);
      this.rows = new Int8Array(rows);
      if (!tokens.length || this.scales.length !== tokens.length || this.rows.length % tokens.length) {
        throw new Error("the token table's files do not fit together");
      }
      this.dim = this.rows.length / tokens.length;
      this.vocab = new Map(tokens.map((t, i) => [t, i]));
      this.spec = spec;
    }

    // basic_words: BERT's normaliser and pre-tokenizer
    basicWords(text) {
      let out = "";
      for (const ch of text) {
        const cp = ch.codePointAt(0);
        if (cp === 0 || cp === 0xfffd) continue;
        if (ch === "\t" || ch === "\n" || ch === "\r" || /\p{Zs}/u.test(ch)) out += " ";
        else if (/[\p{Cc}\p{Cf}]/u.test(ch)) continue;
        else if (isCjk(cp)) out += ` ${ch} `;
        else out += ch;
      }
      const text2 = out.toLowerCase().normalize("NFD").replace(/\p{Mn}/gu, "");
      const words = [];
      for (const chunk of pySplit(text2)) {
        let word = "";
        for (const ch of chunk) {
          if (isPunctuation(ch)) { if (word) words.push(word); words.push(ch); word = ""; } else word += ch;
        }
        if (word) words.push(word);
      }
      return words;
    }

    wordpiece(word) {
      const chars = Array.from(word), unk = [this.spec.unk];
      if (chars.length > this.spec.max_word_chars) return unk;
      const pieces = [];
      let start = 0;
      while (start < chars.length) {
        let end = chars.length, piece = null;
        while (end > start) {
          const sub = chars.slice(start, end).join("");
          const p = start === 0 ? sub : "##" + sub;
          if (this.vocab.has(p)) { piece = p; break; }
          end--;
        }
        if (piece === null) return unk;
        pieces.push(piece);
        start = end;
      }
      return pieces;
    }

    tokenIds(text) {
      const unk = this.vocab.get(this.spec.unk), ids = [];
      for (const word of this.basicWords(text)) {
        for (const piece of this.wordpiece(word)) {
          const i = this.vocab.has(piece) ? this.vocab.get(piece) : unk;
          if (i !== unk) {
            ids.push(i);
            if (ids.length >= this.spec.max_tokens) return ids;
          }
        }
      }
      return ids;
    }

    // encode_query: a unit vector (plain numbers), or null when no token is known
    encodeQuery(text, sum) {
      const ids = this.tokenIds(text);
      if (!ids.length) return null;
      const dim = this.dim, total = new Float64Array(dim);
      for (const i of ids) {
        const scale = this.scales[i], base = i * dim;
        for (let j = 0; j < dim; j++) total[j] = total[j] + scale * this.rows[base + j];
      }
      const norm = Math.sqrt(sum(total.map((t) => t * t)));
      return norm > 0 ? total.map((t) => t / norm) : null;
    }
  }

  function isPunctuation(ch) {
    const cp = ch.codePointAt(0);
    if ((cp >= 33 && cp <= 47) || (cp >= 58 && cp <= 64) || (cp >= 91 && cp <= 96) || (cp >= 123 && cp <= 126)) return true;
    return /\p{P}/u.test(ch);
  }

  function isCjk(cp) {
    return (cp >= 0x4e00 && cp <= 0x9fff) || (cp >= 0x3400 && cp <= 0x4dbf) || (cp >= 0x20000 && cp <= 0x2a6df)
      || (cp >= 0x2a700 && cp <= 0x2b73f) || (cp >= 0x2b740 && cp <= 0x2b81f) || (cp >= 0x2b820 && cp <= 0x2ceaf)
      || (cp >= 0xf900 && cp <= 0xfaff) || (cp >= 0x2f800 && cp <= 0x2fa1f);
  }

  // ------------------------------------------------------------ node: the parity check's ranker

  function cli() {
    const fs = require("fs"), path = require("path");
    const dir = process.argv[2];
    const flags = process.argv.slice(3);
    const index = new Index(JSON.parse(fs.readFileSync(path.join(dir, "kb-index.json"), "utf8")));
    const spec = index.data.embed;
    if (spec && !flags.includes("--lexical")) {
      try {
        const read = (name) => { const b = fs.readFileSync(path.join(dir, name)); return b.buffer.slice(b.byteOffset, b.byteOffset + b.length); };
        index.useEmbedder(new Embedder(spec, fs.readFileSync(path.join(dir, spec.tokens), "utf8"), read(spec.rows), read(spec.scales)));
      } catch (err) {
        process.stderr.write(`kb-search: ranking by words only: ${err.message}\n`);
      }
    }
    const queries = JSON.parse(fs.readFileSync(0, "utf8"));
    for (const item of queries) {
      const query = typeof item === "string" ? item : item.query, limit = item.limit || 10;
      process.stdout.write(JSON.stringify(index.answer(query, limit, !flags.includes("--lexical"))) + "\n");
    }
  }

  // ------------------------------------------------------------ the page: box, loading, results

  function mountBox(doc) {
    const start = () => {
      const script = doc.querySelector("script[src*='kb-search.js']");
      const base = new URL(".", script ? script.src : doc.baseURI); // the search/ folder
      const root = new URL("..", base);
      const form = doc.createElement("form");
      form.className = "kb-search";
      form.setAttribute("role", "search");
      form.addEventListener("submit", (e) => e.preventDefault());
      form.innerHTML = '<label class="kb-search__label" for="kb-search-input">Search entries</label>'
        + '<input id="kb-search-input" class="kb-search__input" type="search" autocomplete="off" spellcheck="false"'
        + ' placeholder="Search symptoms ( / )" role="combobox" aria-autocomplete="list" aria-expanded="false"'
        + ' aria-controls="kb-search-results" aria-describedby="kb-search-status">'
        + '<p id="kb-search-status" class="kb-search__status" role="status" aria-live="polite"></p>'
        + '<ol id="kb-search-results" class="kb-search__results" role="listbox" aria-label="Matching entries" hidden></ol>';
      const header = doc.querySelector(".md-header__inner");
      const anchor = header && (header.querySelector(".md-header__source") || null);
      if (header) header.insertBefore(form, anchor); else doc.body.insertBefore(form, doc.body.firstChild);
      new SearchBox(form, base, root);
    };
    if (doc.readyState === "loading") doc.addEventListener("DOMContentLoaded", start); else start();
  }

  class SearchBox {
    constructor(form, base, root) {
      this.form = form; this.base = base; this.root = root;
      this.input = form.querySelector("input");
      this.list = form.querySelector("ol");
      this.status = form.querySelector(".kb-search__status");
      this.index = null; this.loading = null; this.mode = "none"; this.active = -1; this.shown = "";
      this.input.addEventListener("focus", () => this.load());
      this.input.addEventListener("input", () => { // rank once typing pauses, not on every key of a paste
        clearTimeout(this.timer);
        this.timer = setTimeout(() => this.update(), 30);
      });
      this.input.addEventListener("keydown", (e) => this.key(e));
      form.ownerDocument.addEventListener("keydown", (e) => {
        const t = e.target, typing = t && (t.isContentEditable || /^(INPUT|TEXTAREA|SELECT)$/.test(t.tagName));
        if (!typing && !e.ctrlKey && !e.metaKey && !e.altKey && (e.key === "/" || e.key === "s")) {
          e.preventDefault();
          e.stopImmediatePropagation();
          this.input.focus();
        }
      }, true);
      form.ownerDocument.addEventListener("click", (e) => { if (!form.contains(e.target)) this.close(); });
    }

    // The index on first focus; the token table right after, in the background: until it is
    // there (or if it never comes) results are ranked by words only, as `kb search --lexical`.
    // A list the user can already act on is never reordered when the table arrives: the full
    // ranking applies from the next keystroke. form.dataset.loaded is set once loading has ended.
    load() {
      if (this.loading) return this.loading;
      this.loading = fetch(new URL("kb-index.json", this.base)).then((r) => {
        if (!r.ok) throw new Error(`kb-index.json: HTTP ${r.status}`);
        return r.json();
      }).then((data) => {
        this.index = new Index(data);
        this.mode = "lexical";
        this.update();
        const spec = data.embed;
        if (!spec) {
          this.note = "ranked by words only: this site was built without entry vectors";
          this.update();
          this.form.dataset.loaded = this.mode;
          return;
        }
        const get = (name, how) => fetch(new URL(name, this.base)).then((r) => {
          if (!r.ok) throw new Error(`${name}: HTTP ${r.status}`);
          return r[how]();
        });
        return Promise.all([get(spec.tokens, "text"), get(spec.rows, "arrayBuffer"), get(spec.scales, "arrayBuffer")])
          .then(([tokens, rows, scales]) => {
            this.index.useEmbedder(new Embedder(spec, tokens, rows, scales));
            if (this.index.embedder) this.mode = "hybrid";
            if (this.list.hidden || this.list.dataset.query !== this.input.value) this.update();
            else this.status.textContent = `${this.list.children.length} entries, ranked by words; `
              + "keep typing for the full ranking";
          }).catch((err) => { this.note = `ranked by words only (${err.message})`; this.update(); })
          .finally(() => { this.form.dataset.loaded = this.mode; });
      }).catch((err) => {
        this.mode = "failed";
        this.form.dataset.loaded = this.mode;
        this.status.textContent = `Search is unavailable: ${err.message}`;
      });
      return this.loading;
    }

    update() {
      const query = this.input.value;
      if (!this.index) { this.load(); return; }
      let hits = [];
      try {
        hits = this.index.answer(query, 10);
      } catch (err) {
        this.render(query, [], err.message);
        return;
      }
      const empty = this.index.validate(query) === null;
      const scope = hits.length && hits[0].out_of_scope ? `Out of scope: ${hits[0].out_of_scope}. The entries below are guesses.` : "";
      this.render(query, hits, empty ? "" : hits.length ? (scope || this.note || "")
        : 'No entry matches that well; try the words you see in the log, e.g. "loss flat".');
    }

    render(query, hits, message) {
      const doc = this.form.ownerDocument, list = this.list;
      list.textContent = "";
      hits.forEach((h, n) => {
        // The link itself is the option (ARIA allows role=option on a link): an option that
        // contained a link would nest one interactive element in another.
        const li = doc.createElement("li");
        li.className = "kb-search__hit" + (h.low_confidence ? " kb-search__hit--low" : "");
        li.setAttribute("role", "none");
        li.dataset.id = h.id;
        const a = doc.createElement("a");
        a.id = `kb-search-hit-${n}`;
        a.setAttribute("role", "option");
        a.setAttribute("aria-selected", "false");
        a.dataset.id = h.id;
        a.href = new URL(`entries/${encodeURIComponent(h.id)}/`, this.root).href;
        a.tabIndex = -1;
        const head = doc.createElement("span");
        head.className = "kb-search__head";
        const id = doc.createElement("code");
        id.className = "kb-search__id";
        id.textContent = h.id;
        const area = doc.createElement("span");
        area.className = "kb-search__area";
        area.textContent = h.area;
        head.append(id, " ", area);
        if (h.low_confidence) {
          const low = doc.createElement("span");
          low.className = "kb-search__low";
          low.textContent = "low confidence";
          low.title = "a guess: few of the query's words are explained by this entry";
          head.append(" ", low);
        }
        const title = doc.createElement("span");
        title.className = "kb-search__title";
        // a title's `code` spans as <code>, as on the entry page, never as raw backticks
        h.title.split(/`+([^`]+)`+/).forEach((part, i) => {
          if (!part) return;
          if (i % 2) { const c = doc.createElement("code"); c.textContent = part; title.append(c); }
          else title.append(part);
        });
        const matched = doc.createElement("span");
        matched.className = "kb-search__matched";
        matched.textContent = h.matched ? `matched: ${h.matched}` : "";
        a.append(head, title, matched);
        if (h.tell_apart) {
          // the leaders are too close to call from the words: the check that separates them
          const tell = doc.createElement("span");
          tell.className = "kb-search__tell";
          tell.textContent = `tell apart: ${h.tell_apart}`;
          a.append(tell);
        }
        li.append(a);
        list.append(li);
      });
      this.active = -1;
      this.input.removeAttribute("aria-activedescendant");
      const open = hits.length > 0;
      list.hidden = !open;
      this.input.setAttribute("aria-expanded", String(open));
      list.dataset.query = query;
      list.dataset.ranking = this.mode;
      this.status.textContent = message || (open ? `${hits.length} entries` : "");
      this.status.classList.toggle("kb-search__status--shown", Boolean(message));
    }

    key(e) {
      const items = Array.from(this.list.children);
      if (e.key === "ArrowDown" || e.key === "ArrowUp") {
        if (!items.length) return;
        e.preventDefault();
        const step = e.key === "ArrowDown" ? 1 : -1;
        this.select((this.active + step + items.length) % items.length, items);
      } else if (e.key === "Enter") {
        const pick = items[this.active >= 0 ? this.active : 0];
        if (pick) { e.preventDefault(); window.location.href = pick.querySelector("a").href; }
      } else if (e.key === "Escape") {
        if (this.list.hidden) this.input.blur(); else this.close();
      }
    }

    select(n, items) {
      items.forEach((li, i) => li.firstChild.setAttribute("aria-selected", String(i === n)));
      this.active = n;
      this.input.setAttribute("aria-activedescendant", items[n].firstChild.id);
      items[n].scrollIntoView({ block: "nearest" });
    }

    close() {
      this.list.hidden = true;
      this.input.setAttribute("aria-expanded", "false");
    }
  }

  return { Index, Embedder, mountBox, cli, pySplit };
});
