"""window quarantine: windows whose evaluation failed, with the error and the next retry

Revision ID: 0003
Revises: 0002
Create Date: 2026-12-01 17:00:00
"""
from alembic import op
import sqlalchemy as sa


revision = '0003'
down_revision = '0002'
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table('window_quarantine',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('model', sa.String(length=200), nullable=False),
    sa.Column('version', sa.String(length=100), nullable=False),
    sa.Column('window_start_ms', sa.BigInteger(), nullable=False),
    sa.Column('window_end_ms', sa.BigInteger(), nullable=False),
    sa.Column('error_type', sa.String(length=200), nullable=False),
    sa.Column('error', sa.Text(), nullable=False),
    sa.Column('attempts', sa.Integer(), nullable=False),
    sa.Column('first_failed_at', sa.DateTime(timezone=True), nullable=False),
    sa.Column('last_failed_at', sa.DateTime(timezone=True), nullable=False),
    sa.Column('next_retry_at', sa.DateTime(timezone=True), nullable=False),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_window_quarantine')),
    sa.UniqueConstraint('model', 'version', 'window_start_ms', name=op.f('uq_window_quarantine_model'))
    )
    with op.batch_alter_table('window_quarantine', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_window_quarantine_next_retry_at'), ['next_retry_at'], unique=False)


def downgrade() -> None:
    with op.batch_alter_table('window_quarantine', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_window_quarantine_next_retry_at'))
    op.drop_table('window_quarantine')
