/*
 * chan.c - a bounded channel of byte buffers from one producer thread to one
 * consumer thread: pass 2 (decode, merge, pairing) hands the rows of the
 * two big tables to the thread that inserts them into SQLite (sink.c), so
 * the two run on two cores.
 *
 * A fixed pool of buffers circulates: the producer takes an empty one
 * (waiting while all are in flight), fills it and sends it; the consumer
 * receives it, reads it and gives it back. Either side can stop early: a
 * closed channel ends the consumer's stream, an aborted one makes the
 * producer's next imp_chan_buf return NULL. It must never lose or reorder
 * a buffer, and never block a side whose peer has gone.
 */
#include <pthread.h>
#include <stdlib.h>

#include "imp.h"

struct imp_chan {
	pthread_mutex_t mu;
	pthread_cond_t cv;            /* any change: both sides re-check */
	uint8_t **empty;              /* stack of empty buffers */
	size_t nempty;
	uint8_t **full;               /* FIFO ring of sent buffers */
	size_t *len;
	size_t head, nfull;
	size_t nbufs;
	bool closed, aborted;
};

int imp_chan_new(struct imp_chan **cp, size_t nbufs, size_t bufsize)
{
	struct imp_chan *c = calloc(1, sizeof *c);

	*cp = NULL;
	if (!c)
		return -1;
	c->nbufs = nbufs;
	c->empty = calloc(nbufs, sizeof *c->empty);
	c->full = calloc(nbufs, sizeof *c->full);
	c->len = calloc(nbufs, sizeof *c->len);
	if (!c->empty || !c->full || !c->len)
		goto nomem;
	for (; c->nempty < nbufs; c->nempty++)
		if (!(c->empty[c->nempty] = malloc(bufsize)))
			goto nomem;
	pthread_mutex_init(&c->mu, NULL);
	pthread_cond_init(&c->cv, NULL);
	*cp = c;
	return 0;
nomem:
	for (size_t i = 0; i < c->nempty; i++)
		free(c->empty[i]);
	free(c->empty);
	free(c->full);
	free(c->len);
	free(c);
	return -1;
}

uint8_t *imp_chan_buf(struct imp_chan *c)
{
	uint8_t *b = NULL;

	pthread_mutex_lock(&c->mu);
	while (!c->nempty && !c->aborted)
		pthread_cond_wait(&c->cv, &c->mu);
	if (!c->aborted)
		b = c->empty[--c->nempty];
	pthread_mutex_unlock(&c->mu);
	return b;
}

void imp_chan_send(struct imp_chan *c, uint8_t *buf, size_t n)
{
	pthread_mutex_lock(&c->mu);
	if (c->aborted) {
		c->empty[c->nempty++] = buf;   /* nobody reads any more */
	} else {
		size_t i = (c->head + c->nfull++) % c->nbufs;

		c->full[i] = buf;
		c->len[i] = n;
	}
	pthread_cond_broadcast(&c->cv);
	pthread_mutex_unlock(&c->mu);
}

void imp_chan_close(struct imp_chan *c)
{
	pthread_mutex_lock(&c->mu);
	c->closed = true;
	pthread_cond_broadcast(&c->cv);
	pthread_mutex_unlock(&c->mu);
}

uint8_t *imp_chan_recv(struct imp_chan *c, size_t *n)
{
	uint8_t *b = NULL;

	pthread_mutex_lock(&c->mu);
	while (!c->nfull && !c->closed)
		pthread_cond_wait(&c->cv, &c->mu);
	if (c->nfull) {
		b = c->full[c->head];
		*n = c->len[c->head];
		c->head = (c->head + 1) % c->nbufs;
		c->nfull--;
	}
	pthread_mutex_unlock(&c->mu);
	return b;
}

void imp_chan_done(struct imp_chan *c, uint8_t *buf)
{
	pthread_mutex_lock(&c->mu);
	c->empty[c->nempty++] = buf;
	pthread_cond_broadcast(&c->cv);
	pthread_mutex_unlock(&c->mu);
}

void imp_chan_abort(struct imp_chan *c)
{
	pthread_mutex_lock(&c->mu);
	c->aborted = true;
	while (c->nfull) {                 /* unread buffers go back */
		c->empty[c->nempty++] = c->full[c->head];
		c->head = (c->head + 1) % c->nbufs;
		c->nfull--;
	}
	pthread_cond_broadcast(&c->cv);
	pthread_mutex_unlock(&c->mu);
}

void imp_chan_free(struct imp_chan *c)
{
	if (!c)
		return;
	/* Both sides are gone: every buffer is back in the pool or in flight
	 * in the full ring. */
	for (size_t i = 0; i < c->nfull; i++)
		c->empty[c->nempty++] = c->full[(c->head + i) % c->nbufs];
	for (size_t i = 0; i < c->nempty; i++)
		free(c->empty[i]);
	pthread_cond_destroy(&c->cv);
	pthread_mutex_destroy(&c->mu);
	free(c->empty);
	free(c->full);
	free(c->len);
	free(c);
}
